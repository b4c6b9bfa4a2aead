"""SageMaker data capture files (JSON Lines, local or on S3) read into the decision answers they hold.

SageMaker writes one JSON object a line for each captured invocation:
`{"captureData": {"endpointInput": {...}, "endpointOutput": {"observedContentType", "mode": "OUTPUT", "data",
"encoding"}}, "eventMetadata": {"eventId", "inferenceId", "inferenceTime", ...}, "eventVersion": "0"}`, where
`encoding` is JSON (the body as text, for the content types the capture config lists as JSON) or BASE64, and
`inferenceId` is there when the caller passed InvokeEndpoint's InferenceId. Objects lie under
`<destination>/<endpoint>/<variant>/yyyy/mm/dd/hh/<name>.jsonl`, so the variant is read from the path.

Only `endpointOutput` is read: a decision response holds no state or instruction text, and the request
(`endpointInput`, present when the capture is not output-only) is neither decoded nor copied anywhere.
Every line is accounted for: an answer, or a count under the reason it holds none. A captured answer is read
here too: its options, pick, distribution and the mix of picks, and one joined to its final answer (Joined).
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_spec.schemas import Answer, DecisionResponse, RequestRun
from pydantic import ValidationError
from tqdm import tqdm

from decisionctl.core.replies import describe_invalid
from decisionctl.readback import readback_of

CAPTURE_SUFFIX = ".jsonl"
JSON_LINES_TYPES = ("application/jsonlines", "application/jsonl", "application/x-jsonlines")
# <variant>/yyyy/mm/dd/hh/<file>: the layout SageMaker writes under <destination>/<endpoint>/
_VARIANT_PATH = re.compile(r"(?:^|/)([^/]+)/\d{4}/\d{2}/\d{2}/\d{2}/[^/]+$")
EXAMPLES_KEPT = 5
NO_ACTION = "none"  # an answer served without a policy carries no x_action


class CaptureError(ValueError):
    """A capture source that cannot be read at all (no such file, no objects under the prefix)."""


@dataclass(frozen=True)
class CapturedAnswer:
    """One decision response found in a capture file: its ids, variant, run identity and answers (no text)."""

    event_id: str
    inference_id: str | None  # InvokeEndpoint's InferenceId, where the caller set one
    request_id: str | None  # x_run.request_id: the adapter's id, which the caller got back in the response
    record_id: Any  # the `id` a JSON Lines record carried (its line number where it had none); None: one request
    variant: str | None
    inference_time: str | None
    response: DecisionResponse
    source: str  # file or object and line, for messages

    @property
    def pair_key(self) -> str:
        """What identifies the invocation across variants (a shadow gets a copy of the same call): its
        InferenceId, else SageMaker's eventId, as Model Monitor merges ground truth; plus the record in a batch."""
        base = self.inference_id or self.event_id
        return base if self.record_id is None else f"{base}#{self.record_id}"

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids an outcome may name this decision by."""
        return tuple(i for i in (self.request_id, self.inference_id, self.event_id) if i)

    @property
    def run(self) -> RequestRun | None:
        return self.response.x_run

    @property
    def answers(self) -> dict[str, Answer]:
        return self.response.answers


def pick(answer: Answer) -> str:
    """The option an answer picks, by name: noul "yes" (p >= 0.5) or "no", choice its option, score the modal
    level's index as the probabilities key it (evaluate's rule, picks.predicted_index)."""
    return readback_of(answer.type).picked_name(answer)


def distribution(answer: Answer) -> dict[str, float]:
    """An answer's probabilities by option name (noul: yes and no)."""
    return readback_of(answer.type).named_distribution(answer)


@dataclass
class CaptureRead:
    """What reading a set of capture sources found: the answers, and the lines that held none, by reason."""

    answers: list[CapturedAnswer] = field(default_factory=list)
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> a few `source` locations
    input_captured: int = 0  # records that also hold the request (not an output-only capture)
    other_variant_files: int = 0  # files passed over because they belong to another variant than the one asked

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] += 1
        kept = self.examples.setdefault(reason, [])
        if len(kept) < EXAMPLES_KEPT:
            kept.append(where)

    def variants(self) -> Counter[str]:
        return Counter(a.variant or "(no variant in path)" for a in self.answers)

    def summary(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "answers": len(self.answers),
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_examples": self.examples,
            "input_captured": self.input_captured,
            "other_variant_files": self.other_variant_files,
            "variants": dict(sorted(self.variants().items())),
        }


def variant_of(path: str) -> str | None:
    """The variant name in a capture object's path (<variant>/yyyy/mm/dd/hh/<file>), None if not laid out so."""
    match = _VARIANT_PATH.search(path.replace("\\", "/"))
    return match.group(1) if match else None


def decode_output(output: Any) -> tuple[bytes, str]:
    """The response body and its content type from a record's `endpointOutput`; ValueError if it has none."""
    if not isinstance(output, dict) or not isinstance(output.get("data"), str):
        raise ValueError("no endpointOutput data")
    encoding = str(output.get("encoding", "")).upper()
    data = output["data"]
    if encoding == "BASE64":
        body = base64.b64decode(data, validate=True)
    elif encoding == "JSON":
        body = data.encode("utf-8")
    else:
        raise ValueError(f"encoding {encoding or 'missing'}, not JSON or BASE64")
    return body, str(output.get("observedContentType", "")).split(";")[0].strip().lower()


def _responses(body: bytes, content_type: str) -> Iterator[tuple[Any, Any]]:
    """(record id, parsed body) per decision in a response body: one, or one per line of a JSON Lines body."""
    if content_type in JSON_LINES_TYPES:
        for n, line in enumerate(body.splitlines(), start=1):
            if line.strip():
                value = json.loads(line)
                record_id = value.pop("id", n) if isinstance(value, dict) else n
                yield record_id, value
        return
    yield None, json.loads(body)


def read_record(line: bytes | str, where: str, variant: str | None, found: CaptureRead) -> None:
    """One capture line into `found`: its answers, or a skip reason (never the line's content)."""
    found.lines += 1
    try:
        record = json.loads(line)
    except ValueError:
        found.skip("not JSON", where)
        return
    if not isinstance(record, dict) or not isinstance(record.get("captureData"), dict):
        found.skip("not a capture record (no captureData)", where)
        return
    capture, meta = record["captureData"], record.get("eventMetadata")
    meta = meta if isinstance(meta, dict) else {}
    if "endpointInput" in capture:
        found.input_captured += 1
    if "endpointOutput" not in capture:
        found.skip("input only (no endpointOutput)", where)
        return
    event_id = meta.get("eventId")
    if not isinstance(event_id, str) or not event_id:
        found.skip("no eventMetadata.eventId", where)
        return
    try:
        body, content_type = decode_output(capture["endpointOutput"])
        parsed = list(_responses(body, content_type))
    except ValueError as exc:
        found.skip(f"unreadable endpointOutput ({str(exc).split(':')[0]})", where)
        return
    inference_id = meta.get("inferenceId") if isinstance(meta.get("inferenceId"), str) else None
    for record_id, value in parsed:
        at = where if record_id is None else f"{where} record {record_id}"
        if isinstance(value, dict) and ("detail" in value or "error" in value) and "answers" not in value:
            found.skip("an error response", at)
            continue
        try:
            response = DecisionResponse.model_validate(value)
        except ValidationError as exc:
            found.skip("not a decision response", f"{at}: {describe_invalid(exc)}")
            continue
        found.answers.append(
            CapturedAnswer(
                event_id=event_id,
                inference_id=inference_id or None,
                request_id=response.x_run.request_id if response.x_run else None,
                record_id=record_id,
                variant=variant,
                inference_time=meta.get("inferenceTime") if isinstance(meta.get("inferenceTime"), str) else None,
                response=response,
                source=at,
            )
        )


# --- sources: local files and directories, s3:// prefixes -------------------------------------------------


def _local_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob(f"*{CAPTURE_SUFFIX}") if p.is_file())
    raise CaptureError(f"{path}: no such file or directory")


def _split_s3(uri: str) -> tuple[str, str]:
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise CaptureError(f"not an s3://bucket/prefix URI: {uri!r}")
    return bucket, prefix


def s3_keys(s3: Any, bucket: str, prefix: str) -> Iterator[str]:
    """Every capture object's key under the prefix, page by page (ListObjectsV2)."""
    token: str | None = None
    while True:
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if token:
            params["ContinuationToken"] = token
        page = s3.list_objects_v2(**params)
        for item in page.get("Contents", []):
            if item["Key"].endswith(CAPTURE_SUFFIX):
                yield item["Key"]
        if not page.get("IsTruncated"):
            return
        token = page["NextContinuationToken"]


def read_sources(
    sources: Iterable[str],
    *,
    s3_client: Callable[[], Any] | None = None,
    variant: str | None = None,
    progress: Callable[..., Any] = tqdm,
) -> CaptureRead:
    """The answers in every capture source (a file, a directory of .jsonl files, or an s3:// prefix). The
    variant comes from each object's path; `variant` keeps only that one. `s3_client` makes the boto3 client."""
    found = CaptureRead()
    units: list[tuple[str, Callable[[], Iterable[bytes | str]]]] = []
    client: Any = None
    for source in sources:
        if source.startswith("s3://"):
            bucket, prefix = _split_s3(source)
            if client is None:
                client = s3_client() if s3_client is not None else _default_s3()
            keys = list(s3_keys(client, bucket, prefix))
            if not keys:
                raise CaptureError(f"{source}: no {CAPTURE_SUFFIX} objects under this prefix")
            units += [(f"s3://{bucket}/{key}", _object_lines(client, bucket, key)) for key in keys]
        else:
            files = _local_files(Path(source))
            if not files:
                raise CaptureError(f"{source}: no {CAPTURE_SUFFIX} files")
            units += [(str(f), _file_lines(f)) for f in files]
    for name, lines in progress(units, desc="capture files", unit="file", disable=None):
        name_variant = variant_of(name)
        if variant is not None and name_variant != variant:
            found.other_variant_files += 1
            continue
        for n, line in enumerate(lines(), start=1):
            if line.strip():
                read_record(line, f"{name}:{n}", name_variant, found)
    return found


def _default_s3() -> Any:
    import boto3

    return boto3.client("s3")


def _file_lines(path: Path) -> Callable[[], Iterable[bytes]]:
    def lines() -> Iterator[bytes]:
        with path.open("rb") as f:
            yield from f

    return lines


def _object_lines(s3: Any, bucket: str, key: str) -> Callable[[], Iterable[bytes]]:
    def lines() -> Iterator[bytes]:
        yield from s3.get_object(Bucket=bucket, Key=key)["Body"].iter_lines()

    return lines


def option_names(answer: Answer) -> tuple[str, ...]:
    """The answer's options in the order evaluate's cases use (noul: yes, no; score: levels 0..n-1)."""
    return readback_of(answer.type).option_names(answer)


def mix_of(answers: Iterable[Answer]) -> dict[str, float]:
    """The share of answers picking each option."""
    picks = Counter(pick(a) for a in answers)
    total = sum(picks.values())
    return {name: n / total for name, n in sorted(picks.items())} if total else {}


def probabilities(answer: Answer) -> list[float]:
    """The answer's probabilities in `option_names` order, as a policy's verdict reads them."""
    dist = distribution(answer)
    return [dist[name] for name in option_names(answer)]


@dataclass(frozen=True)
class Joined:
    captured: CapturedAnswer
    question_id: str
    answer: Answer
    final: str  # the option people chose, in `pick`'s terms
    line: int

    @property
    def case_id(self) -> str:
        return f"{self.captured.request_id or self.captured.pair_key}/{self.question_id}"

    @property
    def action(self) -> str:
        return self.answer.x_action or NO_ACTION

    @property
    def changed(self) -> bool:
        return pick(self.answer) != self.final
