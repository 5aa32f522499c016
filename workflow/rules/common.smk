import shlex
import sys
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate
from specproof.errors import ConfigError
from specproof.evidence.stages import job_parts
from specproof.study.config import load_study, load_yaml
from specproof.publish.figures import NAMES as FIGURE_NAMES
from specproof.catalog import analyzed_records, format_records, of_kind, record, study_files
from specproof.publish.manifests import compared_sets, is_frozen, set_dir, split_set

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
# absolute: a study first named by a target file (not --config study=) is validated while
# the DAG is built, where Snakemake cannot resolve a schema path relative to this file
STUDY_SCHEMA = str(Path(workflow.basedir) / "src/specproof/study/schemas/study.schema.yaml")


wildcard_constraints:
    study=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    set=r"[A-Za-z0-9][A-Za-z0-9_.-]*(@[A-Za-z0-9][A-Za-z0-9_-]*)?",
    part=r"[^/]+",


def records(set_id):
    """A record set '<study>@<machine>' is read from its frozen manifest and never
    recomputed implicitly; a bare '<study>' is this machine's results/<study>/."""
    if is_frozen(MANIFESTS, set_id):
        return str(set_dir(MANIFESTS, set_id))
    return f"{RESULTS}/{split_set(set_id)[0]}"


def record_files(set_id):
    """The files a record set holds (``specproof.catalog``): every record of the current
    manifest format, except the newer ones a frozen set predates."""
    d = records(set_id)
    frozen = is_frozen(MANIFESTS, set_id)
    return [f"{d}/{f}" for f in format_records()
            if record(f).since == 1 or not frozen or Path(d, f).is_file()]


def set_records(wildcards):
    return record_files(wildcards.set)


def all_study_records(wildcards=None):
    return [f for s in config["studies"] for f in record_files(s)]


def head_machines():
    """The record sets the paper's machines section compares (``compared_sets``): the head
    study's machines, or those of the first listed study frozen on several machines."""
    return compared_sets(config["studies"])


def break_even_sets():
    """The record sets the break-even map places (config ``break_even``), each one a listed
    study; none draws no map."""
    sets = config.get("break_even") or []
    for i, s in enumerate(sets):
        if s not in config["studies"]:
            fail(f"config/config.yaml: field break_even.{i}: {s!r} is not in studies")
    return sets


def break_even_png():
    """The break-even map the paper and the audit read, or nothing when none is drawn."""
    return [f"{FIGURES}/break_even/break_even.png"] if break_even_sets() else []


def benchmark_tables(wildcards=None):
    """The benchmark tables the paper cites (written by benchmarks/*.py, never by a rule)."""
    return sorted(str(p) for p in Path(BENCHMARKS).glob("*.json")) + sorted(
        str(p) for p in Path(BENCHMARKS).glob("*.md"))


def package_code(wildcards=None):
    """The package's modules: numbers.json is computed from records by this code, so a
    change to it reruns `numbers` (Snakemake's own code trigger sees only the rule)."""
    return sorted(str(p) for p in (Path(workflow.basedir) / "src/specproof").rglob("*.py"))


def head_study():
    """The record set the paper reports: the first one config.yaml lists."""
    return config["studies"][0]


def paper_pdf():
    return f"{PAPER}/paper.pdf"


def fail(message):
    """A user's mistake stops planning with one line and exit status 2."""
    print(f"snakemake: error: {message}", file=sys.stderr)
    sys.exit(2)


def study_config(wildcards):
    """The study config file of the rule's study: a declared input of every stage that reads it."""
    return f"{STUDIES_DIR}/{wildcards.study}.yaml"


def study_data(study):
    return study_object(study).data


@cache
def study_object(study):
    """The study config, validated at planning time: Snakemake's ``validate`` against the
    study schema, then specproof's cross-references (pairs name known models); any error
    is one line naming the file and the field."""
    path = Path(STUDIES_DIR) / f"{study}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in Path(STUDIES_DIR).glob("*.yaml")))
        fail(f"unknown study {study!r}: no {path} (known: {known})")
    try:
        validate(load_yaml(path), STUDY_SCHEMA, set_default=False)
    except ConfigError as exc:  # not YAML, or not a mapping
        fail(str(exc))
    except WorkflowError as exc:
        err = exc.__context__
        field = ".".join(str(p) for p in getattr(err, "absolute_path", [])) or "(top level)"
        fail(f"{path}: field {field}: {getattr(err, 'message', exc)}")
    try:
        return load_study(path)
    except ConfigError as exc:
        fail(str(exc))


def prompt_files(wildcards):
    """The prompt files a study's workloads name (source: file) and those its reserved
    prompts must be disjoint from (prediction.reserved_disjoint_from), relative to the checkout."""
    data = study_data(wildcards.study)
    files = [w["path"] for w in data["workloads"].values() if w["source"] == "file" and "path" in w]
    return files + data.get("prediction", {}).get("reserved_disjoint_from", []) + frozen_prompt_files()


def frozen_prompt_files():
    """Every frozen set's prompts.jsonl and models.json: the prompts stage checks that no
    reserved prompt was run by a frozen set of the same models (workloads.check_blind); a
    set named with a leading '.' is one a freeze is writing, not frozen."""
    return sorted(str(p.parent / name) for p in Path(MANIFESTS).glob("*/*/manifest.json")
                  if not p.parent.name.startswith(".") for name in ("prompts.jsonl", "models.json"))


def study_seed(wildcards):
    return study_data(wildcards.study)["settings"]["seed"]


def model_mem_mb(wildcards):
    """Memory of a model-running job, MB: the study's ``resources.mem_mb`` (default 8000)."""
    return study_data(wildcards.study).get("resources", {}).get("mem_mb", 8000)


def model_gres(wildcards):
    """SLURM generic resources of a model-running job (e.g. "gpu:1"): the study's
    ``resources.gres``; empty (none asked) by default."""
    return study_data(wildcards.study).get("resources", {}).get("gres", "")


def job_files(stage, *names):
    """Input function of a gather rule: the files every job of a split stage writes
    (one job per pair or per target; ``evidence.stages.JOBS``)."""
    return lambda w: [f"{RESULTS}/{w.study}/jobs/{stage}/{part}/{n}"
                      for part in job_parts(study_object(w.study), stage) for n in names]


def job_out(stage, name):
    return f"{RESULTS}/{{study}}/jobs/{stage}/{{part}}/{name}"


# Each stage's progress (tqdm, on stderr) goes to the terminal and to its log file. Every
# path in a shell line is quoted ({x:q}), so that results or model directories may hold spaces.
TEE = "2>&1 | tee {log:q}"


def stage_cmd(name, extra=""):
    """The shell line that runs one model-running stage of a study into its results dir;
    the study config reaches it as an argument (the rule's ``input.config``). ``extra``:
    ``--part {wildcards.part}`` for one job of a split stage, ``--gather`` to join them."""
    return (f"specproof stage {name} --config {{input.config:q}} --model-dir {shlex.quote(MODEL_DIR)} "
            f"--results {results_arg()} {extra} {TEE}")


def results_arg():
    """``--results``' value in a shell line: the study's results directory, quoted so that
    a path with spaces stays one argument (a study name never holds one)."""
    return f"{shlex.quote(RESULTS)}/{{wildcards.study}}"


if "study" in config:  # the study `snakemake study` runs: a bad one stops planning here
    study_data(split_set(config["study"])[0])
