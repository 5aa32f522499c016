from pathlib import Path

from snakemake.utils import validate
from specproof.publish.figures import NAMES as FIGURE_NAMES
from specproof.publish.manifests import DERIVED, RAW

# the schemas ship inside the package (importlib.resources), so an installed specproof finds them
validate(config, "../../src/specproof/study/schemas/config.schema.yaml")

RESULTS = config.get("results_dir", "results")
MANIFESTS = config.get("manifests_dir", "manifests")
FIGURES = config.get("figures_dir", "figures")
PAPER = config.get("paper_dir", "paper")
STUDIES_DIR = config.get("studies_dir", "config/studies")
MODEL_DIR = config.get("model_dir", "resources/models")
BENCHMARKS = config.get("benchmarks_dir", "benchmarks/results")
ENV = "../../environment.yml"


wildcard_constraints:
    study=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


def frozen(study):
    return Path(MANIFESTS, study, "manifest.json").is_file()


def records(study):
    """A frozen study is read from its manifest and never recomputed implicitly."""
    return f"{MANIFESTS}/{study}" if frozen(study) else f"{RESULTS}/{study}"


def study_records(wildcards):
    return [f"{records(wildcards.study)}/{f}" for f in RAW + DERIVED]


def all_study_records(wildcards=None):
    return [f"{records(s)}/{f}" for s in config["studies"] for f in RAW + DERIVED]


def benchmark_tables(wildcards=None):
    """The benchmark tables the paper cites (written by benchmarks/*.py, never by a rule)."""
    return sorted(str(p) for p in Path(BENCHMARKS).glob("*.json")) + sorted(
        str(p) for p in Path(BENCHMARKS).glob("*.md"))


def head_study():
    return config.get("study", config["studies"][0])


def paper_pdf():
    return f"{PAPER}/paper.pdf"


def stage_cmd(name):
    """The shell line that runs one model-running stage of a study into its results dir."""
    return (f"specproof stage {name} --study {{wildcards.study}} --studies-dir {STUDIES_DIR} "
            f"--model-dir {MODEL_DIR} --results {RESULTS}/{{wildcards.study}} > {{log}} 2>&1")
