"""A job's result, typed: one small dataclass per phase, composed into `JobResult`.

Each phase returns its section (explain, compile cost, parity, speed, memory, energy, profile,
isolation, shapes, convergence, ...); the protocol sets it on the job's result. `to_dict` writes
`result.json` with the same flat field names as always (docs/results.md): a section's fields are
its keys, a nested side (`eager`, `compiled`) or probe (`compile_warm`) prefixes its own. A section
that did not run is absent; a field of a section that ran but was not measured is null.

The table's columns, the swept axes' names and the dashboard's fields come from these types and
their metadata (`header`, `source`, `role`, `group`, `dashboard`), not from lists spelled out
elsewhere; docs/results.md documents exactly these fields (a test holds the two together). It is
longer than the other modules on purpose: the whole result, one dataclass per phase, reads best in
one file, as the config's schema does.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

NUMBER = float | None
SCHEMA_VERSION = 4
"""4: the `generation` section (`bench.task=generate`, 2026-12-04). 3: the `numerics` section,
`parity_worst` (2026-12-04). 2: `error_where`, `error_log`,
`compute_dtype`, `compiled_fraction`; no `explain_break_count` or `graph_breaks_compile`
(2026-12-04). 1: every result.json before, which carries no version."""


def figure(header: str | None = None, *, dashboard: bool = False, default: Any = None) -> Any:
    """A field with the table header it has (the printed table) and whether the dashboard lists it."""
    return field(default=default, metadata={"header": header, "dashboard": dashboard})


def setting(
    source: str, role: str, header: str | None = None, group: str | None = None, axis: str | None = None
) -> Any:
    """A setting of the job, copied from the config key `source`; `role` says what it names: the
    `model` a sweep compares settings on, or a `compile` setting compared on it; `group`: the config
    group whose choice (`parallel=ddp`) sets it; `axis`: another key whose sweep it labels (the
    interpreter's path, labelled by its name)."""
    meta = {"source": source, "role": role, "header": header, "group": group, "dashboard": True}
    return field(default=None, metadata={**meta, "axis": axis})


def side(cls: type) -> Any:
    """A per-side part (eager, compiled): its fields are written `<side>_<field>`."""
    return field(default_factory=cls, metadata={"side": True})


@dataclass
class Identity:
    """Who the job is: its id, where it belongs, the settings that make it (flattened from the config)."""

    job_id: str = figure(dashboard=True, default="")
    schema_version: int = SCHEMA_VERSION  # what this result.json holds (1: written before versions)
    sweep: str = ""
    label: str = ""
    axes: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    workload: str | None = setting("workload.name", "model", group="workload")
    model: str | None = setting("workload.model", "model")
    size: str | None = setting("workload.size", "model")
    task: str | None = setting("bench.task", "model", group="bench")
    dtype: str | None = setting("bench.dtype", "model")
    strategy: str | None = setting("parallel.strategy", "model", header="parallel", group="parallel")
    env: str | None = setting("env.name", "model", axis="env.python")
    mode: str | None = setting("compile.mode", "compile", group="compile")
    dynamic: bool | None = setting("compile.dynamic", "compile")
    fullgraph: bool | None = setting("compile.fullgraph", "compile")
    backend: str | None = setting("compile.backend", "compile")
    cache: str | None = setting("compile.cache", "compile")
    scope: str | None = setting("compile.scope", "compile")
    freezing: bool | None = setting("compile.freezing", "compile")
    path: str | None = setting("compile.path", "compile")
    prompt_len: int | None = setting("generate.prompt_len", "model", header="prompt")
    """`bench.task=generate` only (null for the other tasks), as the three below."""
    new_tokens: int | None = setting("generate.new_tokens", "model", header="new")
    kv_cache: str | None = setting("generate.cache", "compile", header="kv cache")
    compiles: str | None = setting("generate.compiled", "compile")
    attention_mask: bool | None = setting("workload.attention_mask", "compile")
    """`hf` text models: an attention mask of ones was passed (a follow-up's lever where the graph's own
    mask keeps attention off its fused kernels)."""
    world_size: int = figure(dashboard=True, default=1)
    follow_up_of: str | None = figure(dashboard=True)
    """A follow-up job: the job whose verdict named the lever it measures (kept out of the suite,
    compare and the upgrade A/B)."""
    lever: str | None = figure(dashboard=True)
    """A follow-up job: the override that makes it from that job (`compile.dynamic=true`)."""


@dataclass
class Outcome:
    """How the job ended, where its logs are, and how it ran."""

    status: str = figure("status", default="crash")
    error: str | None = figure(dashboard=True)
    error_where: str | None = figure(dashboard=True)
    """Where it failed: the user's code (`file:line (function)`), else the library's innermost line."""
    error_log: str | None = figure(dashboard=True)
    """The file that holds the failure's whole traceback (the job's stderr log)."""
    exit_code: int | None = None
    wall_s: NUMBER = None
    pid: int | None = None
    forked: bool | None = None
    """The measuring process was a fork of the sweep's fork server (job/processes/fork_server.py), not a new
    interpreter: its start-up holds no imports."""
    started_ahead: bool | None = None
    """The measuring process was an interpreter the sweep's fork server started ahead
    (`launcher.start_ahead`): its imports ran before the job was handed to it."""
    log_stdout: str | None = None
    log_stderr: str | None = None
    dist_backend: str | None = None
    ranks_per_gpu: int | None = None
    processes_error: str | None = None
    trace_dir: str | None = None
    tlparse_index: str | None = None


@dataclass
class ModelFigures:
    """The workload as measured: its size, its step's shape and FLOPs, whether it draws random numbers."""

    params: int | None = None
    batch_size: int | None = None
    seq_len: int | None = None
    model_mode: str | None = None
    blocks: str | None = figure(dashboard=True)
    flops_per_step: int | None = None
    flops_basis: str | None = None
    random_ops: bool | None = None
    optimizer: str | None = None
    compute_dtype: str | None = None


@dataclass
class Explain:
    """torch._dynamo.explain on the unwrapped model, before the timed compile."""

    explain_graphs: int | None = None
    graph_breaks: int | None = figure("breaks", dashboard=True)
    """The job's one graph-break count: the break sites dynamo reported while tracing (`break_reasons`)."""
    break_reasons: list[Any] = field(default_factory=list)
    explain_ops: int | None = None
    compiled_fraction: NUMBER = figure("compiled", dashboard=True)
    """Of one forward's ATen operator calls, the share that ran inside captured graphs (1: all of it)."""
    forward_ops: int | None = None
    graph_matmuls: int | None = None
    """Matmul calls (mm, addmm, bmm, baddbmm) inside the captured graphs in one forward."""
    graph_fp32_matmuls: int | None = None
    """Of those, the ones that ran in float32 (TF32 speeds them on a GPU, `bench.matmul_precision=high`)."""
    graph_attention: int | None = None
    """Fused attention calls (a backend's `_scaled_dot_product_*` op) in the captured graphs, one forward."""
    graph_masked_attention: int | None = None
    """Of those, the ones passed a mask or bias tensor (a causal call without one passes none)."""
    graph_expanded_masks: int | None = None
    """SDPA calls in dynamo's graphs passed an expanded mask (stride 0 along its last dimension, as
    transformers builds a mask while dynamo traces): no fused GPU kernel takes one, so the math path
    runs them as matmuls and a softmax (PyTorch's sdp_utils)."""
    forward_attention: int | None = None
    """Fused attention calls in one eager forward (the compiled fraction's eager count)."""
    forward_masked_attention: int | None = None
    """Of those, the ones passed a mask or bias tensor."""
    explain_note: str | None = None


@dataclass
class CompileMetrics:
    """Where a compile's seconds went and what its caches gave, from torch's compilation metrics."""

    compile_frames: int = 0
    compile_kernel_s: float = 0.0
    compile_autotune_s: float = 0.0
    fx_cache_hits: int = 0
    fx_cache_misses: int = 0
    aot_cache_hits: int = 0
    aot_cache_misses: int = 0
    compile_cache_hits: int = 0
    guard_count: int = 0
    graph_ops: int = figure(dashboard=True, default=0)
    phase_dynamo_s: float = 0.0
    phase_aot_autograd_s: float = 0.0
    phase_inductor_s: float = 0.0
    phase_codegen_s: float = 0.0
    phase_backward_s: float = 0.0
    recompile_reasons: list[Any] = field(default_factory=list)
    cudagraph_skip_reasons: list[Any] = field(default_factory=list)


# A recompile reason where dynamo recorded none: a frame compiled with no failed guard (its first
# compile, a new frame), as written into `step_recompile_reasons` and read back by the verdict.
NO_REASON = "no reason recorded"

# The compile's phases, in order: CompileMetrics' `phase_<name>_s` fields.
COMPILE_PHASES = tuple(
    f.name.removeprefix("phase_").removesuffix("_s")
    for f in dataclasses.fields(CompileMetrics)
    if f.name.startswith("phase_")
)


@dataclass
class CompileCost:
    """The first compiled call: its seconds, the graphs it captured, and (cold) its metrics."""

    first_call_s: NUMBER = None
    compile_s: NUMBER = figure("compile s", dashboard=True)
    compile_cold_s: NUMBER = None
    graphs: int | None = figure(dashboard=True)
    frames_ok: int | None = None
    compile_optimizer_s: NUMBER = None
    compile_artifacts_mb: NUMBER = None
    compile_energy_j: NUMBER = None
    cudagraph_skips: int | None = None
    step_recompiles: int | None = figure(dashboard=True)
    """Forward frames compiled again during the warm-up and the timed steps: guards that failed after
    the first call (the timed steps hold compiles; past dynamo's recompile limit the frame runs eager)."""
    step_recompile_reasons: list[Any] = field(default_factory=list)
    metrics: CompileMetrics | None = field(default=None, metadata={"inline": True})


@dataclass
class Probe:
    """One compile in a fresh process (`warm`: the job's filled cache; `portable`: its artifacts)."""

    s: NUMBER = None
    load_s: NUMBER = None
    cache_hits: int | None = None
    frames: int | None = None
    pid: int | None = None
    error: str | None = None


@dataclass
class Probes:
    """The warm and portable compiles, and what the warm one costs back."""

    compile_warm: Probe = side(Probe)
    compile_portable: Probe = side(Probe)
    break_even_warm_steps: NUMBER = None


@dataclass
class Aoti:
    """`compile.path=aoti`: export, package, cold start in a fresh process, load here."""

    aoti_export_s: NUMBER = None
    aoti_package_s: NUMBER = figure(dashboard=True)
    aoti_package_mb: NUMBER = None
    aoti_package: str | None = None
    aoti_load_s: NUMBER = figure(dashboard=True)
    aoti_cold_start_s: NUMBER = None
    aoti_load_warm_s: NUMBER = None


@dataclass
class Parity:
    """Compiled against eager (and fp64 where affordable), by PyTorch's accuracy checker's rule."""

    parity_ok: bool | None = figure("parity", dashboard=True)
    parity_err: NUMBER = figure(dashboard=True)
    parity_limit: NUMBER = None
    parity_tol: NUMBER = None
    parity_rule: str | None = None
    parity_reference: str | None = None
    parity_vs_eager: NUMBER = None
    parity_eager_err: NUMBER = None
    parity_out_err: NUMBER = None
    parity_grad_err: NUMBER = None
    parity_buffer_err: NUMBER = None
    parity_buffers: int | None = None
    parity_error: str | None = None
    parity_eager_not_finite: list[Any] = field(default_factory=list)
    """Where eager itself is not finite, its non-finite tensors (`output[0]: NaN`): no parity judged."""
    parity_buffers_updated: list[Any] = field(default_factory=list)
    """Buffers the eager call changed, as `name (dtype)`: a forward that updates its own state."""
    parity_rng: str | None = None
    parity_note: str | None = None
    parity_worst: list[Any] = field(default_factory=list)
    """The worst three compared tensors (`loss`/`output[i]`, `grad <param>`, `buffer <name>`), each
    `{tensor, err, limit}`, by error over limit: which one is off (single-process jobs)."""


@dataclass
class SideSpeed:
    """One side's step time and throughput."""

    ms: NUMBER = figure("{side} ms", dashboard=True)
    p50_ms: NUMBER = None
    p90_ms: NUMBER = None
    p99_ms: NUMBER = None
    samples_per_s: NUMBER = None
    samples_per_s_by_rank: list[Any] = field(default_factory=list)
    tokens_per_s: NUMBER = figure(dashboard=True)
    tokens_per_s_per_device: NUMBER = None
    mfu: NUMBER = figure("{side} mfu", dashboard=True)  # FLOPs a step / step time / mfu_peak_tflops
    mfu_spec: NUMBER = None  # the same against the datasheet's FLOP/s (mfu_spec_tflops)


@dataclass
class Speed:
    """The timed phase: each side's step time, the speedup with its CI, throughput, MFU."""

    eager: SideSpeed = side(SideSpeed)
    compiled: SideSpeed = side(SideSpeed)
    speedup: NUMBER = figure("speedup", dashboard=True)
    speedup_ci_low: NUMBER = None
    speedup_ci_high: NUMBER = None
    speedup_ci_scope: str | None = None
    processes: int | None = None
    interleaved: bool | None = None
    sides_note: str | None = None
    mfu_peak_tflops: NUMBER = figure(dashboard=True)
    mfu_basis: str | None = figure(dashboard=True)
    mfu_spec_tflops: NUMBER = None  # the datasheet's FLOP/s for this dtype (null: none known)
    break_even_steps: NUMBER = figure(dashboard=True)


@dataclass
class Isolation:
    """Was the job alone on its device and host, right before timing?"""

    iso_ok: bool | None = figure("isolation")
    iso_note: str | None = figure(dashboard=True)
    iso_load_1m: NUMBER = None
    iso_cores: int | None = None
    iso_foreign_processes: list[Any] = field(default_factory=list)
    iso_sm_clock_mhz: NUMBER = None
    iso_max_sm_clock_mhz: NUMBER = None
    iso_throttle: list[Any] = field(default_factory=list)
    iso_temperature_c: NUMBER = None
    iso_power_w: NUMBER = None


@dataclass
class Energy:
    """Joules per step of each side (NVML), and the steps that pay the compile's energy back."""

    eager_j_per_step: NUMBER = figure(dashboard=True)
    compiled_j_per_step: NUMBER = figure(dashboard=True)
    energy_ratio: NUMBER = None
    energy_break_even_steps: NUMBER = figure(dashboard=True)
    energy_note: str | None = None


@dataclass
class SideMemory:
    """One side's peak memory, and its step time in a process of its own."""

    peak_gib: NUMBER = figure(dashboard=True)
    reserved_gib: NUMBER = None
    alone_ms: NUMBER = None


@dataclass
class Memory:
    """Peak CUDA memory of each side (each alone in a fresh process, or in place per rank)."""

    eager: SideMemory = side(SideMemory)
    compiled: SideMemory = side(SideMemory)
    memory_ratio: NUMBER = None
    memory_basis: str | None = None
    memory_note: str | None = None
    memory_error: str | None = None


@dataclass
class SideProfile:
    """One side under the profiler, and its roofline point."""

    kernels_per_step: NUMBER = None
    busy_fraction: NUMBER = None
    overhead_ms_per_step: NUMBER = None
    """The compiled call's own host time a step: dynamo's guard check and the compiled region's
    wrapper (their self time under the profiler; 0 for eager)."""
    profile_step_ms: NUMBER = None
    optimizer_ms_per_step: NUMBER = None
    """Training: the optimizer step's own time a step (its `Optimizer.step` range: on a GPU its span on
    the device's timeline, on a CPU its host time)."""
    top_kernels: list[Any] = field(default_factory=list)
    time_split: dict[str, Any] = field(default_factory=dict)
    """Where a step's kernel (CPU: op) time goes, ms per step by kind: `matmul`, `attention`,
    `fused` (inductor's generated kernels), `elementwise`, `copy`, `host` (the compiled call's own
    wrapper), `other` (job/phases/profile.py `kernel_kind`)."""
    profile_trace: str | None = None
    attention_backend: str | None = None
    """The fused attention kernels the side ran (flash, efficient, cudnn; math: a CPU's math op), or
    `none fused` (a GPU's math path: matmuls and a softmax)."""
    bytes_per_step: NUMBER = None
    flops_per_s: NUMBER = None
    bytes_per_s: NUMBER = None
    mbu: NUMBER = figure("{side} step mbu", dashboard=True)  # bytes_per_s / peak_bytes_per_s
    mbu_spec: NUMBER = None  # bytes_per_s / spec_bytes_per_s
    intensity: NUMBER = None


@dataclass
class Profile:
    """The untimed profiler pass (`bench.profile=true`)."""

    profile_unit: str | None = None
    profile_steps: int | None = None
    profile_note: str | None = None
    peak_flops_per_s: NUMBER = None
    peak_bytes_per_s: NUMBER = None
    peak_bytes_basis: str | None = None  # where peak_bytes_per_s came from: measured here, or the spec
    spec_bytes_per_s: NUMBER = None
    roofline_note: str | None = None
    eager: SideProfile = side(SideProfile)
    compiled: SideProfile = side(SideProfile)


@dataclass
class Shapes:
    """The dynamic-shape schedule: recompiles and what they cost."""

    dyn_shapes: int | None = None
    dyn_recompiles: int | None = figure("recompiles", dashboard=True)
    dyn_compile_s: NUMBER = None
    dyn_total_compile_s: NUMBER = None
    dyn_speedup: NUMBER = None
    dyn_recompile_reasons: list[Any] = field(default_factory=list)


@dataclass
class Convergence:
    """Eager, compiled and a batch-reversed eager copy over N training steps."""

    conv_steps: int | None = None
    conv_eager_loss: list[Any] = field(default_factory=list)
    conv_compiled_loss: list[Any] = field(default_factory=list)
    conv_reference_loss: list[Any] = field(default_factory=list)
    conv_divergence: NUMBER = None
    conv_baseline_divergence: NUMBER = None
    conv_limit: NUMBER = None
    conv_ok: bool | None = None
    conv_final_diff: NUMBER = None
    conv_final_rel_diff: NUMBER = None
    conv_loss_drop: NUMBER = None
    conv_note: str | None = None


@dataclass
class GenerationSide:
    """One side's serving figures (`bench.task=generate`), medians over the timed requests."""

    ttft_ms: NUMBER = figure(dashboard=True)  # time to first token: the prefill, and its token
    first_request_s: NUMBER = None  # the side's first request whole (the compiled side's compiles in it)
    first_ttft_ms: NUMBER = None  # that request's time to first token: cold, the prefill's compile in it
    decode_p50_ms: NUMBER = None  # per decode token, over every token of the timed requests
    decode_p90_ms: NUMBER = None
    decode_tokens_per_s: NUMBER = figure("{side} tok/s", dashboard=True)  # batch x decode tokens / seconds
    e2e_ms: NUMBER = None  # a request end to end: prefill and every decode token
    decode_mbu: NUMBER = figure("{side} mbu", dashboard=True)  # decode bytes / decode_p50 / gen_bandwidth
    decode_mbu_spec: NUMBER = None  # the same against the datasheet's bandwidth
    prefill_mfu: NUMBER = figure(dashboard=True)  # gen_prefill_flops / ttft / gen_peak_tflops
    prefill_mfu_spec: NUMBER = None  # the same against the datasheet's FLOP/s


@dataclass
class Generation:
    """`bench.task=generate` (job/phases/generation.py): a prompt, then a token at a time over a KV cache."""

    eager: GenerationSide = side(GenerationSide)
    compiled: GenerationSide = side(GenerationSide)
    gen_ttft_speedup: NUMBER = figure("ttft x", dashboard=True)
    gen_ttft_ci_low: NUMBER = None
    gen_ttft_ci_high: NUMBER = None
    gen_e2e_speedup: NUMBER = None
    gen_e2e_ci_low: NUMBER = None
    gen_e2e_ci_high: NUMBER = None
    gen_frames: int | None = None  # frames compiled over the compiled side's first request
    gen_recompiles: int | None = figure("recompiles/req", dashboard=True)  # of those, compiled again
    gen_recompile_reasons: list[Any] = field(default_factory=list)
    gen_compile_s: NUMBER = None  # first request, compiled minus eager
    gen_recompile_s: NUMBER = None  # of the first request's compiling, the recompiled frames' seconds
    gen_recompile_limit: str | None = figure(dashboard=True)
    """Dynamo's own line where a frame hit its recompile limit: that frame then ran eager."""
    gen_parity_errors: list[Any] = field(default_factory=list)  # teacher-forced logits' error, per token
    gen_first_divergence: int | None = None  # the first generated token where greedy tokens part
    gen_cache_gib: NUMBER = None  # one side's KV cache at the end of a request
    gen_weight_bytes: int | None = None  # parameter bytes a decode step reads (lookup tables: a row a token)
    gen_kv_bytes_per_position: int | None = None  # K and V of one position, all layers, the whole batch
    gen_decode_bytes: NUMBER = None  # a decode step's bytes, averaged over a request (job/phases/limits.py)
    gen_prefill_flops: NUMBER = None  # a prefill's FLOPs: matmuls and causal attention
    gen_bandwidth_tb_s: NUMBER = None  # the bandwidth MBU is held against: measured copy, else datasheet
    gen_bandwidth_basis: str | None = None  # which, or why none is known
    gen_spec_tb_s: NUMBER = None  # the datasheet's bandwidth, where the GPU is in the table
    gen_peak_tflops: NUMBER = None  # the FLOP/s the prefill's MFU is held against: measured, else datasheet
    gen_flops_basis: str | None = None  # which, or why none is known
    gen_spec_tflops: NUMBER = None  # the datasheet's FLOP/s for the served dtype


@dataclass
class Environment:
    """What the result was measured on."""

    env_torch: str | None = None
    env_triton: str | None = None
    env_cuda: str | None = None
    env_device: str | None = None
    env_host: str | None = None
    env_boot: str | None = None  # the host's boot id: one name (a VM's "vm") can be many machines
    env_python: str | None = None
    env_interpreter: str | None = None
    env_world_size: int | None = None
    env_git: str | None = None
    env_cpu_threads: int | None = None


@dataclass
class Numerics:
    """The numerics both sides ran at, read back from torch inside the job's scope (not copied from
    the config): what a speedup on a GPU depends on as much as on the compiler."""

    num_matmul_precision: str | None = None  # torch.get_float32_matmul_precision(): highest = no TF32
    num_cuda_matmul_tf32: bool | None = None  # torch.backends.cuda.matmul.allow_tf32
    num_cudnn_tf32: bool | None = None  # torch.backends.cudnn.allow_tf32 (convolutions)
    num_cudnn_benchmark: bool | None = None  # torch.backends.cudnn.benchmark
    num_sdp_reduced_math: bool | None = None  # the math attention kernel may reduce in bf16/fp16
    numerics: str | None = figure("numerics", dashboard=True)
    """The above in a few words, as the table and the verdict show them."""


@dataclass
class WallTime:
    """The job's wall time by phase (job/phases/wall.py), seconds; the supervisor adds the teardown."""

    wall_startup_s: NUMBER = None  # interpreter start and imports, until the worker's first line
    wall_setup_s: NUMBER = None  # cache directories, device checks, the process group
    wall_wait_s: NUMBER = None  # waiting for the device's lock (`launcher.overlap`) or a spare's imports
    wall_primer_s: NUMBER = None  # a throwaway compile: the process's one-offs (cache=private)
    wall_build_s: NUMBER = None  # the workload: model, inputs, the same weights on every rank
    wall_flops_s: NUMBER = None  # one eager step under the FLOP counter
    wall_explain_s: NUMBER = None  # torch._dynamo.explain
    wall_first_calls_s: NUMBER = None  # the first eager and compiled calls (the cold compile)
    wall_parity_s: NUMBER = None  # outputs, gradients and buffers against eager and fp64
    wall_timed_s: NUMBER = None  # warm-up and the timed repetitions
    wall_profile_s: NUMBER = None  # the untimed profiler pass
    wall_memory_s: NUMBER = None  # per-rank memory (distributed CUDA jobs)
    wall_shapes_s: NUMBER = None  # the dynamic-shape schedule
    wall_convergence_s: NUMBER = None  # N training steps of each side
    wall_random_parity_s: NUMBER = None  # random ops: their parity compiles, after the rest
    wall_processes_s: NUMBER = None  # more paired repetitions in fresh processes
    wall_sides_alone_s: NUMBER = None  # each side alone in a fresh process (memory; or the sides apart)
    wall_probes_s: NUMBER = None  # warm and portable compile in fresh processes
    wall_finish_s: NUMBER = None  # tlparse, the environment, the result's file
    wall_other_s: NUMBER = None  # what no phase claimed
    wall_teardown_s: NUMBER = None  # result written -> process gone (wandb, exit); the supervisor's
    job_wall_s: NUMBER = figure(dashboard=True)  # worker started -> process gone: the phases' sum
    wall_written_at: NUMBER = None  # when the result was written (epoch seconds)
    wall_locked_at: NUMBER = None  # when the job took its device's lock (epoch s; `launcher.overlap`)


@dataclass
class JobResult:
    """One job's result: its sections, each None until its phase ran."""

    identity: Identity = field(default_factory=Identity)
    outcome: Outcome = field(default_factory=Outcome)
    model: ModelFigures | None = None
    explain: Explain | None = None
    compile: CompileCost | None = None
    probes: Probes | None = None
    aoti: Aoti | None = None
    parity: Parity | None = None
    speed: Speed | None = None
    isolation: Isolation | None = None
    energy: Energy | None = None
    memory: Memory | None = None
    profile: Profile | None = None
    shapes: Shapes | None = None
    convergence: Convergence | None = None
    generation: Generation | None = None
    environment: Environment | None = None
    numerics: Numerics | None = None
    wall: WallTime | None = None
    timings: dict[str, Any] | None = None
    """Per repetition: `<side>_ms`, `process`; per step: `<side>_step_ms` (speed.measure_speed)."""

    legacy: dict[str, Any] = field(default_factory=dict)
    """Keys of an older result.json that no field declares now (kept, so that a row reads back whole)."""

    def to_dict(self) -> dict[str, Any]:
        """The flat result.json."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or f.name == "legacy":
                continue
            if dataclasses.is_dataclass(value):
                out.update(flat(value))
            else:
                out[f.name] = value
        return {**self.legacy, **out}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> JobResult:
        """A result.json read back, of any schema version: a section is there when any of its keys
        is (as `to_dict` writes it); keys no field declares now go to `legacy`. For rows this version
        wrote, `from_dict(row).to_dict() == row`."""
        result = cls(identity=unflat(Identity, row), outcome=unflat(Outcome, row))
        for name, section_type in SECTION_TYPES.items():
            if name not in ("identity", "outcome") and any(
                rf.key in row for rf in _fields(section_type, name)
            ):
                setattr(result, name, unflat(section_type, row, section=name))
        result.timings = row.get("timings")
        if "schema_version" not in row:
            result.identity.schema_version = 1  # written before versions were
        known = set(FIELDS)
        result.legacy = {k: v for k, v in row.items() if k not in known}
        return result


def unflat(cls: type, row: dict[str, Any], prefix: str = "", section: str = "") -> Any:
    """The inverse of `flat`: a section (its sides and inline parts too) from a flat row."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("side"):
            values[f.name] = unflat(f.default_factory, row, f"{prefix}{f.name}_", section)  # type: ignore[arg-type]
        elif f.metadata.get("inline"):
            part = INLINE_TYPES[(section, f.name)]
            if any(rf.key in row for rf in _fields(part, section, prefix)):
                values[f.name] = unflat(part, row, prefix, section)
        elif f"{prefix}{f.name}" in row:
            values[f.name] = row[f"{prefix}{f.name}"]
    return cls(**values)


def flat(section: Any, prefix: str = "") -> dict[str, Any]:
    """A section's fields as result keys: sides prefixed by their name, inline parts merged."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if f.metadata.get("side"):
            out.update(flat(value, f"{prefix}{f.name}_"))
        elif f.metadata.get("inline"):  # a part merged into its section's keys, where it ran
            if value is not None:
                out.update(flat(value, prefix))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


@dataclass(frozen=True)
class ResultField:
    """One key of result.json, as the types declare it."""

    key: str
    section: str
    header: str | None
    dashboard: bool
    source: str | None
    role: str | None
    group: str | None
    axis: str | None = None


SECTION_TYPES: dict[str, type] = {
    "identity": Identity,
    "outcome": Outcome,
    "model": ModelFigures,
    "explain": Explain,
    "compile": CompileCost,
    "probes": Probes,
    "aoti": Aoti,
    "parity": Parity,
    "speed": Speed,
    "isolation": Isolation,
    "energy": Energy,
    "memory": Memory,
    "profile": Profile,
    "shapes": Shapes,
    "convergence": Convergence,
    "generation": Generation,
    "environment": Environment,
    "numerics": Numerics,
    "wall": WallTime,
}
INLINE_TYPES = {("compile", "metrics"): CompileMetrics}


@functools.cache  # read per section of every result a sweep gathers: the types do not change
def _fields(cls: type, section: str, prefix: str = "", side: str = "") -> tuple[ResultField, ...]:
    out: list[ResultField] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("side"):
            out += _fields(f.default_factory, section, f"{prefix}{f.name}_", f.name)  # type: ignore[arg-type]
        elif f.metadata.get("inline"):
            out += _fields(INLINE_TYPES[(section, f.name)], section, prefix)
        else:
            m = f.metadata
            head = m.get("header")
            head = head.format(side=side) if head else None
            dash = bool(m.get("dashboard"))
            key = f"{prefix}{f.name}"
            where = (m.get("source"), m.get("role"), m.get("group"), m.get("axis"))
            out.append(ResultField(key, section, head, dash, *where))
    return tuple(out)


def result_fields() -> list[ResultField]:
    """Every result.json field the types declare, in section order (`timings` last)."""
    out = [rf for name, cls in SECTION_TYPES.items() for rf in _fields(cls, name)]
    return out + [ResultField("timings", "timings", None, False, None, None, None)]


FIELDS: dict[str, ResultField] = {rf.key: rf for rf in result_fields()}


class Columns:
    """The result's field names, for readers of a result row or a results table: `COL.speedup` is
    "speedup"; a name no field declares raises AttributeError where it is read (not an empty column
    later). Readers name fields through it rather than spelling them out (a test holds them to it)."""

    def __getattr__(self, name: str) -> str:
        if name in FIELDS:
            return name
        raise AttributeError(f"no result field {name!r} (orchestrator/core/result.py)")


COL = Columns()


def keys_of(role: str) -> tuple[str, ...]:
    """The settings fields of a role (`model`, `compile`), in declaration order."""
    return tuple(rf.key for rf in FIELDS.values() if rf.role == role)


def group_columns() -> dict[str, str]:
    """Config group -> the result field its choice sets (`parallel=ddp` sets `strategy`)."""
    return {rf.group: rf.key for rf in FIELDS.values() if rf.group}


def source_columns() -> dict[str, str]:
    """Config key -> the result field that holds it (`workload.name` is `workload`, and the swept
    `env.python` is labelled by `env`, its name)."""
    out = {rf.source: rf.key for rf in FIELDS.values() if rf.source}
    return out | {rf.axis: rf.key for rf in FIELDS.values() if rf.axis}


def header(key: str) -> str:
    """A field's column header: its declared one, else the key itself. An unknown key fails here,
    so that a column list cannot name a field the result does not have."""
    return FIELDS[key].header or key
