"""DDP and FSDP2 with 2 gloo ranks through the real submitit LocalExecutor, compiled."""

from __future__ import annotations

from conftest import TESTS, by_label, run_cli


def test_ddp_and_fsdp_compile_match_single_process_and_sum_throughput(tmp_path, fast):
    proc = run_cli(
        ["+sweep=parallel", "compile.mode=default", *fast, "launcher.max_parallel=1"],
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = by_label(tmp_path / "sweeps" / "parallel")
    none, ddp, fsdp = (r[f"parallel={p}"] for p in ("none", "ddp", "fsdp"))
    for job in (ddp, fsdp):
        assert job["status"] == "ok", job["error"]
        assert job["world_size"] == job["env_world_size"] == 2
        assert job["graphs"] >= 1, "compiled under the wrapper: graphs were captured"
        # parity on all ranks (max-reduced) against the single-process fp64 run of the same model and data
        assert job["parity_ok"] and job["parity_reference"] == "fp64"
        assert job["parity_grad_err"] < 1e-4
        by_rank = job["compiled_samples_per_s_by_rank"]
        assert len(by_rank) == 2 and all(v > 0 for v in by_rank)
        assert abs(job["compiled_samples_per_s"] - sum(by_rank)) < 1e-9 * sum(by_rank), (
            "cluster = sum of ranks"
        )
    assert none["world_size"] == 1 and none["status"] == "ok"
    import csv

    rows = {
        row["strategy"]: row
        for row in csv.DictReader((tmp_path / "sweeps" / "parallel" / "results.csv").open())
    }
    assert float(rows["ddp"]["scaling_efficiency"]) > 0, "efficiency against the `none` run in the same sweep"


def test_one_rank_failing_fails_the_job_not_the_sweep(tmp_path, fast):
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:Stacked,user_models:RankOneRaises,user_models:RankZeroFailsRankOneWaits",
            "parallel=ddp",
            *fast,
            "bench.timeout_s=120",
            "launcher.max_requeues=0",
            "sweep.report=false",
        ],
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 1
    r = by_label(tmp_path / "sweeps" / "default")
    assert r["workload.target=user_models:Stacked"]["status"] == "ok"
    bad = r["workload.target=user_models:RankOneRaises"]
    assert bad["status"] != "ok"
    assert "rank 1" in bad["error"] and "planted failure on rank 1" in bad["error"], bad["error"]
    # A rank left waiting after another failed (bench.timeout_s would end it at 120 s): stopped by the
    # orchestrator RANK_GRACE_S after the first rank's recorded failure, which is the job's.
    stuck = r["workload.target=user_models:RankZeroFailsRankOneWaits"]
    assert stuck["status"] == "crash" and stuck["error"].startswith("rank 0: "), stuck["error"]
    assert "planted failure on rank 0" in stuck["error"] and "other ranks were stopped" in stuck["error"]


def test_an_earlier_attempts_rank_error_is_not_this_attempts(tmp_path):
    """A rerun job's folder may hold the rank errors of its failed attempt: the new attempt is not
    stopped for them, and its submission clears them (the worker and the diagnosis read the first)."""
    import json
    import time

    from orchestrator.config.plan import build_plan
    from orchestrator.core.failures import RANK_ERROR, clear_rank_errors, first_rank_error, write_rank_error
    from orchestrator.launch.diagnosis import Attempt
    from orchestrator.launch.local import RANK_GRACE_S, stop_stuck_ranks

    (spec,) = build_plan(["parallel=ddp", "logger=none"], cwd=tmp_path).jobs
    spec.job_dir.mkdir(parents=True)
    write_rank_error(spec.job_dir, 0, "crash", "the earlier attempt's failure")
    path = spec.job_dir / RANK_ERROR.format(0)
    old = json.loads(path.read_text()) | {"time": time.time() - 10 * RANK_GRACE_S}
    path.write_text(json.dumps(old))
    now = Attempt(spec, job=None, started=time.time())  # never cancelled: nothing of its own failed
    assert stop_stuck_ranks(now) is None
    clear_rank_errors(spec.job_dir)
    assert first_rank_error(spec.job_dir) is None


def test_a_local_job_of_several_ranks_meets_at_a_port_free_at_its_submission(tmp_path):
    """submitit's own pick (random from the job's pid) can be a port in use: rank 0's EADDRINUSE, seen
    in CI beside another sweep's gloo connections. The local launcher hands a free one to the job's
    environment for its submission only."""
    import os
    import socket

    from orchestrator.config.plan import build_plan
    from orchestrator.launch.launchers import make_launcher

    ddp = build_plan(["parallel=ddp", "logger=none"], cwd=tmp_path)
    one = build_plan(["logger=none"], cwd=tmp_path)
    launcher = make_launcher(ddp.base, ddp.sweep_dir)
    before = os.environ.get("MASTER_PORT")
    with launcher.submitting(ddp.jobs[0]):
        port = int(os.environ["MASTER_PORT"])
        with socket.socket() as s:
            s.bind(("", port))  # free: this process can take it (the job's rank 0 will, next)
    assert os.environ.get("MASTER_PORT") == before, "scoped to the submission"
    with launcher.submitting(one.jobs[0]):
        assert os.environ.get("MASTER_PORT") == before, "a one-rank job meets no one"


def test_fsdp_compiles_each_block_then_shards_it_then_the_root(tmp_path):
    """The wrap order on a real (one-rank, gloo) process group: the same code runs for any world size."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule

    from orchestrator.config.schema import CompileConfig, WorkloadConfig
    from orchestrator.core.user_code import user_code
    from orchestrator.job.setup.parallelize import prepare
    from workloads import build_workload

    cfg = WorkloadConfig(name="module", target="user_models:Stacked", path=str(TESTS), inputs=[[4, 32]])
    with user_code(cfg.path):
        workload = build_workload(cfg, "train", torch.device("cpu"))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = prepare(workload, "fsdp", CompileConfig(mode="default"), torch.device("cpu"), "fp32")
        blocks = model.inner.layers
        assert len(blocks) == 2 and isinstance(model, FSDPModule), "the root is sharded"
        for block in blocks:
            assert isinstance(block, torch._dynamo.eval_frame.OptimizedModule), "each block compiled"
            assert isinstance(block, FSDPModule), "then the compiled block is sharded"
        eager = prepare(workload, "fsdp", None, torch.device("cpu"), "fp32")
        assert not any(isinstance(b, torch._dynamo.eval_frame.OptimizedModule) for b in eager.inner.layers)
        assert workload.model.inner.layers[0] is not blocks[0]._orig_mod, "sides are copies"
    finally:
        dist.destroy_process_group()


def test_ranks_beyond_the_gpus_share_them_over_gloo(monkeypatch):
    """Placement and backend for two ranks on one GPU. There is no GPU here, so the device count is
    set by monkeypatch; the H200 run in benchmarks/h200-parallel-1gpu/shared-gpu/ is the real one."""
    import torch

    from orchestrator.job.setup.parallelize import dist_backend, local_device, ranks_per_gpu

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    cuda = torch.device("cuda")
    assert ranks_per_gpu() == 2 and local_device(cuda) == torch.device("cuda", 0)
    assert dist_backend(cuda, "auto") == "gloo", "nccl refuses two ranks on one device"
    assert dist_backend(cuda, "nccl") == "nccl", "the user's choice stands"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert ranks_per_gpu() == 1 and local_device(cuda) == torch.device("cuda", 1)
    assert dist_backend(cuda, "auto") == "nccl"
    assert dist_backend(torch.device("cpu"), "auto") == "gloo"


def _leave(dist) -> None:
    """End a spawned gloo rank: gloo's threads can abort a normal interpreter exit ('terminate called
    without an active exception', SIGABRT, seen with ranks pinned to one core each), so leave at once,
    the files written."""
    import os

    dist.destroy_process_group()
    os._exit(0)


def _rank_weights(rank: int, store: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    from orchestrator.job.setup.parallelize import same_weights_on_every_rank

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.manual_seed(rank)  # as if each rank's device drew other numbers from the same seed
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    same_weights_on_every_rank(model)
    torch.save(model.state_dict(), f"{out}.{rank}")
    _leave(dist)


def test_every_rank_starts_from_rank_zeros_weights(tmp_path):
    import torch
    import torch.multiprocessing as mp

    mp.spawn(_rank_weights, args=(str(tmp_path / "store"), str(tmp_path / "w")), nprocs=2)
    zero, one = (torch.load(tmp_path / f"w.{r}") for r in (0, 1))
    torch.manual_seed(0)
    expected = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)).state_dict()
    for name in expected:
        assert torch.equal(zero[name], one[name]) and torch.equal(one[name], expected[name]), name


def _rank_gather(rank: int, store: str, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from orchestrator.job.setup.parallelize import full_tensor, gather_through_host

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    whole = torch.arange(15.0).view(5, 3)  # 5 rows over 2 ranks: uneven shards, as FSDP2's can be
    sharded = distribute_tensor(whole, mesh, [Shard(0)])
    got = {
        "host": gather_through_host(sharded),
        "full": full_tensor(sharded),
        "local_rows": sharded.to_local().shape[0],
    }
    torch.save(got, f"{out}.{rank}")
    _leave(dist)


def test_a_sharded_tensor_gathered_through_host_memory_is_whole(tmp_path):
    """Parity gathers FSDP2's sharded gradients; over gloo on CUDA that goes through host memory
    (DTensor's own gather died there). Here the host path, on CPU, for uneven shards."""
    import torch
    import torch.multiprocessing as mp

    from orchestrator.job.setup.parallelize import full_tensor

    mp.spawn(_rank_gather, args=(str(tmp_path / "store"), str(tmp_path / "g")), nprocs=2)
    whole = torch.arange(15.0).view(5, 3)
    got = [torch.load(tmp_path / f"g.{r}") for r in (0, 1)]
    assert [g["local_rows"] for g in got] == [3, 2]
    for g in got:
        assert torch.equal(g["host"], whole) and torch.equal(g["full"], whole)
    plain = torch.ones(2)
    assert full_tensor(plain) is plain


def test_fsdp2_shards_a_transformers_models_nested_blocks_and_refuses_a_model_without(tmp_path, fast):
    """A tiny Llama (its blocks at model.layers) under FSDP2 over gloo, each block compiled and sharded;
    a model without repeated blocks is refused in one line, not sharded at the root alone."""
    proc = run_cli(
        [
            "parallel=fsdp",
            "workload=hf",
            "workload.model=LlamaForCausalLM",
            "compile.backend=aot_eager",
            *fast,
            "sweep.report=false",
        ],
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = by_label(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "ok" and r["world_size"] == 2, r["error"]
    assert r["blocks"] == "model.layers (2 x LlamaDecoderLayer)" and r["parity_ok"]
    flat = run_cli(
        [
            "parallel=fsdp",
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:MLP",
            "compile.mode=eager",
            *fast,
            "sweep.report=false",
            "sweep.name=flat",
        ],
        cwd=tmp_path,
        timeout=600,
    )
    assert flat.returncode == 2 and flat.stderr.count("\n") == 1, flat.stderr  # before anything runs
    assert "parallel=fsdp needs repeated blocks" in flat.stderr and "parallel=ddp" in flat.stderr
    assert not (tmp_path / "sweeps" / "flat").exists()
