# specproof: provenance -> sealed references -> speculative runs -> agreement, costs,
# certificate -> figures -> paper. Rules are wiring; the work is in src/specproof.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


# steps that load no model and take seconds (among them the gathers of split stages) run
# where snakemake runs, not as cluster jobs
localrules:
    all, study, models, prompts, reference, runs, micro, qualification, analyze, figures,
    machines_figure, break_even_figure, numbers, drift, study_numbers, study_report, paper, audit,


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
