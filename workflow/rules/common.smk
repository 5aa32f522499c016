from pathlib import Path

from snakemake.utils import validate
from specproof.publish.figures import NAMES as FIGURE_NAMES
from specproof.publish.manifests import DERIVED, OPTIONAL, RAW, is_frozen, set_dir, split_set

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
    set=r"[A-Za-z0-9][A-Za-z0-9_.-]*(@[A-Za-z0-9][A-Za-z0-9_-]*)?",


def records(set_id):
    """A record set '<study>@<machine>' is read from its frozen manifest and never
    recomputed implicitly; a bare '<study>' is this machine's results/<study>/."""
    if is_frozen(MANIFESTS, set_id):
        return str(set_dir(MANIFESTS, set_id))
    return f"{RESULTS}/{split_set(set_id)[0]}"


def record_files(set_id):
    """The files a record set holds: every raw and derived record; the optional raw records
    (written by newer stages) too, except where a frozen set predates them."""
    d = records(set_id)
    optional = [f for f in OPTIONAL if not is_frozen(MANIFESTS, set_id) or Path(d, f).is_file()]
    return [f"{d}/{f}" for f in RAW + optional + DERIVED]


def set_records(wildcards):
    return record_files(wildcards.set)


def all_study_records(wildcards=None):
    return [f for s in config["studies"] for f in record_files(s)]


def head_machines():
    """The frozen record sets of the head set's study that config.yaml lists (the paper's
    machines section compares them)."""
    study = split_set(head_study())[0]
    return [s for s in config["studies"] if split_set(s)[0] == study and split_set(s)[1]]


def benchmark_tables(wildcards=None):
    """The benchmark tables the paper cites (written by benchmarks/*.py, never by a rule)."""
    return sorted(str(p) for p in Path(BENCHMARKS).glob("*.json")) + sorted(
        str(p) for p in Path(BENCHMARKS).glob("*.md"))


def head_study():
    """The record set the paper reports: the first one config.yaml lists."""
    return config["studies"][0]


def paper_pdf():
    return f"{PAPER}/paper.pdf"


def stage_cmd(name):
    """The shell line that runs one model-running stage of a study into its results dir."""
    return (f"specproof stage {name} --study {{wildcards.study}} --studies-dir {STUDIES_DIR} "
            f"--model-dir {MODEL_DIR} --results {RESULTS}/{{wildcards.study}} > {{log}} 2>&1")
