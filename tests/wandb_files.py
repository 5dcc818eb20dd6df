"""Read wandb's offline run files (`run-*.wandb`) back, for the tests.

wandb 0.31 ships no Python reader, so this reads the format directly: a 7-byte header (":W&B",
magic 0xBEE1, version), then 32 KiB blocks of LevelDB-log records (crc32, length, type), whose
payloads are wandb's own `Record` protobufs (wandb.proto.wandb_internal_pb2).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
HEADER = struct.Struct("<4sHB")
RECORD = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    group: str = ""
    job_type: str = ""
    name: str = ""
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    kinds: dict = field(default_factory=dict)


def payloads(path: Path):
    data = path.read_bytes()
    ident, magic, _version = HEADER.unpack_from(data, 0)
    assert ident == b":W&B" and magic == 0xBEE1, f"not a wandb run file: {path}"
    pos, pending = HEADER.size, b""
    while pos + RECORD.size <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < RECORD.size:  # block trailer padding
            pos += left_in_block
            continue
        _crc, length, kind = RECORD.unpack_from(data, pos)
        pos += RECORD.size
        chunk = data[pos : pos + length]
        pos += length
        if kind == 0 and length == 0:
            continue
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""


def _items(items) -> dict:
    return {(i.key or ".".join(i.nested_key)): json.loads(i.value_json) for i in items}


def read_run(path: Path) -> OfflineRun:
    run = OfflineRun()
    for payload in payloads(path):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(payload)
        kind = rec.WhichOneof("record_type")
        run.kinds[kind] = run.kinds.get(kind, 0) + 1
        if kind == "run":
            run.group, run.job_type, run.name = rec.run.run_group, rec.run.job_type, rec.run.display_name
            run.config.update(_items(rec.run.config.update))
        elif kind == "config":
            run.config.update(_items(rec.config.update))
        elif kind == "summary":
            run.summary.update(_items(rec.summary.update))
        elif kind == "history":
            run.history.append(_items(rec.history.item))
    return run
