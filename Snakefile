# specproof: provenance -> sealed references -> speculative runs -> agreement, costs,
# certificate -> figures -> paper. Rules are wiring; the work is in src/specproof.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/setup.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/losslessness.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/manifests.smk"


rule all:
    input:
        paper_pdf(),
    default_target: True
