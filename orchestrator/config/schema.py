"""Structured configs: the schema every composed config is checked against.

OmegaConf checks types, choices (the `StrEnum` fields) and unknown keys when Hydra composes; each
dataclass's ``__post_init__`` checks ranges when the composed config is turned into objects
(``spec.to_job_config``). Both kinds of error surface as one ``ConfigError`` line naming the key.
It imports only `orchestrator.core` (the failure classes and ConfigError): workloads, plan and
jobs all depend on it. It is long on purpose: the whole schema, one
dataclass per section with a docstring per field, reads best in one file (as torchtitan's job
config does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.core.failures import FAILURE_CLASSES, ConfigError

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# The modes whose compiled side replays CUDA graphs (inductor's triton.cudagraphs=True).
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


def choices(name: str, values: tuple[str, ...]) -> type[StrEnum]:
    """A StrEnum whose members are `values` (names may hold '-'); OmegaConf checks them on compose."""
    return StrEnum(name, [(v, v) for v in values], module=__name__)  # type: ignore[return-value]


# mypy takes no enum made at run time as a type: to it each is a StrEnum (members read by name).
if TYPE_CHECKING:

    class CompileMode(StrEnum): ...

    class WorkloadName(StrEnum): ...

    class InputDtype(StrEnum): ...

    class CacheKind(StrEnum): ...

    class Task(StrEnum): ...

    class GenCache(StrEnum): ...

    class GenCompiled(StrEnum): ...

    class Dtype(StrEnum): ...

    class DeviceName(StrEnum): ...

    class SidesMode(StrEnum): ...

    class Strategy(StrEnum): ...

    class DistBackend(StrEnum): ...

    class LauncherName(StrEnum): ...

    class LoggerMode(StrEnum): ...

    class FailureClass(StrEnum): ...

    class VerdictCache(StrEnum): ...

    class CompileScope(StrEnum): ...

    class CompilePath(StrEnum): ...

    class MatmulPrecision(StrEnum): ...
else:
    CompileMode = choices("CompileMode", COMPILE_MODES)
    WorkloadName = choices("WorkloadName", ("block", "gpt", "module", "hf", "timm"))
    InputDtype = choices("InputDtype", ("float", "long"))
    CacheKind = choices("CacheKind", ("private", "shared"))
    Task = choices("Task", ("train", "infer", "generate"))
    GenCache = choices("GenCache", ("static", "dynamic"))
    GenCompiled = choices("GenCompiled", ("both", "decode", "prefill"))
    Dtype = choices("Dtype", ("fp32", "bf16", "fp16"))
    DeviceName = choices("DeviceName", ("auto", "cpu", "cuda"))
    SidesMode = choices("SidesMode", ("auto", "paired", "apart"))
    Strategy = choices("Strategy", ("none", "ddp", "fsdp"))
    DistBackend = choices("DistBackend", ("auto", "nccl", "gloo"))
    LauncherName = choices("LauncherName", ("local", "slurm", "debug"))
    LoggerMode = choices("LoggerMode", ("offline", "online", "disabled"))
    FailureClass = choices("FailureClass", FAILURE_CLASSES)
    VerdictCache = choices("VerdictCache", ("cold", "warm"))
    CompileScope = choices("CompileScope", ("model", "blocks", "regions"))
    CompilePath = choices("CompilePath", ("jit", "aoti"))
    MatmulPrecision = choices("MatmulPrecision", ("highest", "high", "medium"))


def check_min(key: str, value: float | None, low: float, strict: bool = False) -> None:
    if value is None:
        return
    if value < low or (strict and value == low):
        raise ConfigError(f"{key}={value} is not valid; it must be {'>' if strict else '>='} {low}")


@dataclass
class WorkloadConfig:
    """What is benchmarked: a built-in model with a size preset, a transformers or timm model by
    name, or the user's own nn.Module."""

    name: WorkloadName = WorkloadName["gpt"]
    """`block` (seed block), `gpt` (decoder), `hf` (transformers), `timm` or `module` (your own)."""
    size: str = "tiny"
    """Size preset (workloads/): gpt and block sizes; hf `tiny`, `small`, `base`, `1b`, `default`."""
    batch_size: int | None = None
    """Samples per step per rank; null takes the preset's."""
    seq_len: int | None = None
    """Tokens per sample (rows for `block`, the image side for `timm`); null takes the preset's."""
    shapes: list[int] = field(default_factory=list)
    """Dynamic-shape schedule: sequence lengths run after the timed phase to count recompiles."""
    model: str | None = None
    """For `hf`: a transformers model class (BertForMaskedLM); for `timm`: a timm model (resnet50)."""
    config: Any = None
    """`hf`: keys of the model's config class to set ({num_hidden_layers: 4}); `timm`: create_model kwargs."""
    attention_mask: bool = False
    """For `hf` text models: also pass an attention mask of ones (PyTorch's harness passes none)."""
    labels: bool | None = None
    """For `hf`: pass labels (the model computes its loss); null: for `train` only."""
    blocks: str | None = None
    """The repeated blocks to compile or shard one by one, as module paths (`model.layers`); null: found."""
    target: str | None = None
    """For `module`: your nn.Module class or a factory returning one, `pkg.mod:Name` or `pkg.mod.Name`."""
    path: str | None = None
    """A directory on sys.path, for the job only, to import your code from (`target`, `compile.backend`)."""
    init_args: Any = None
    """For `module`: keyword arguments of your class or factory."""
    inputs: Any = None
    """For `module`: random inputs of forward, batch first: shapes ([[8,64]]), named (keywords:
    {input_ids: {shape: [8,128], dtype: long, high: 1000}, attention_mask: {shape: [8,128], fill: 1}}),
    or one positional dict in a list ([{x: [8,64], mask: {shape: [8,64], fill: 1}}]: forward(batch))."""
    input_dtype: InputDtype = InputDtype["float"]
    """For `module` shapes: `float` (randn) or `long` (token ids below `vocab`)."""
    vocab: int = 256
    """For `module` integer inputs: upper bound of the random ids (an input's own `high` wins)."""
    make_inputs: str | None = None
    """For `module`: your `fn(batch_size, seq_len, device)`: a tuple (positional; `(batch_dict,)` passes one
    dict as it is) or a dict (keywords)."""
    loss: str | None = None
    """For `module`: your training loss `fn(output, inputs)`; null: the output's `loss`, a scalar as it
    is, else the mean of squares of its first tensor."""

    def __post_init__(self) -> None:
        check_min("workload.batch_size", self.batch_size, 1)
        check_min("workload.seq_len", self.seq_len, 1)
        check_min("workload.vocab", self.vocab, 1)
        for s in self.shapes:
            check_min("workload.shapes[]", s, 1)
        for key in ("init_args", "config"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, dict):
                raise ConfigError(f"workload.{key}={value!r} must be a mapping, e.g. {{dim: 64}}")
        needs = {"module": ("target",), "hf": ("model",), "timm": ("model",)}.get(str(self.name), ())
        for key in needs:
            if not getattr(self, key):
                raise ConfigError(f"workload.{key} is required for workload={self.name}")
        for key in ("target", "make_inputs", "loss", "inputs") if self.name != "module" else ():
            if getattr(self, key):
                instead = {  # what the built-in workloads take instead
                    "inputs": "; it makes its own inputs (set workload.batch_size, workload.seq_len)",
                }.get(key, "; add workload=module")
                raise ConfigError(
                    f"workload.{key} is for workload=module (got workload={self.name}){instead}"
                )
        if self.name == "module" and not self.inputs and not self.make_inputs:
            raise ConfigError(
                "workload.inputs is required for workload=module (e.g. [[8,64]]), "
                "or workload.make_inputs=pkg:fn"
            )


@dataclass
class CompileConfig:
    """How the compiled side is built."""

    mode: CompileMode = CompileMode["default"]
    """torch.compile mode; `eager` runs the eager model on both sides (a control)."""
    dynamic: bool | None = None
    """torch.compile's dynamic flag: null (automatic), true or false."""
    fullgraph: bool = False
    """Fail on any graph break instead of splitting the graph."""
    backend: str = "inductor"
    """A registered dynamo backend name, or `pkg.mod:fn` for your own."""
    cache: CacheKind = CacheKind["private"]
    """`private`: each job compiles into its own empty cache (a cold figure whatever ran before);
    `shared`: one cache for the sweep (`cache_dir`), faster, its cache hits recorded with the figure."""
    cache_dir: str | None = None
    """The cache of `cache=shared`; null puts it in the sweep directory."""
    probes: bool = True
    """Also compile in fresh processes: `warm` (the job's filled cache) and `portable` (its saved
    artifacts, an empty cache); single-process jobs only."""
    trace: bool = False
    """Write a TORCH_TRACE of the job's compile into its directory (read by tlparse)."""
    require_cudagraphs: bool = False
    """Fail the job (compile_error) when a CUDA-graph mode skipped CUDA graphs."""
    freezing: bool = False
    """TORCHINDUCTOR_FREEZING=1 (inference only; lets max-autotune tune CPU matmuls)."""
    scope: CompileScope = CompileScope["model"]
    """What is compiled: `model` (one torch.compile), `blocks` (each repeated block on its own, the
    rest eager, as torchtitan) or `regions` (the model, each block a nested_compile_region)."""
    options: dict[str, Any] = field(default_factory=dict)
    """torch._inductor.config keys for the compiled side, e.g. {coordinate_descent_tuning: true}
    (nested or dotted: triton.cudagraph_trees); checked against the installed torch."""
    path: CompilePath = CompilePath["jit"]
    """`jit` (torch.compile) or `aoti` (torch.export, then an AOTInductor package; inference only)."""
    optimizer: bool = False
    """`train`: compile the compiled side's optimizer step too (AdamW with foreach on both sides),
    as PyTorch's harness times forward, backward and the step compiled together."""

    def __post_init__(self) -> None:
        if self.mode not in ("eager", "default") and self.backend != "inductor":
            raise ConfigError(
                f"compile.mode={self.mode} needs compile.backend=inductor, got {self.backend!r}"
            )


@dataclass
class BenchConfig:
    """What is run and how it is timed."""

    task: Task = Task["train"]
    """`train` (forward, loss, backward, optimizer step), `infer` (forward under no_grad) or `generate`
    (a decoder's prefill, then one token at a time over a KV cache: the `generate` section)."""
    dtype: Dtype = Dtype["fp32"]
    """Compute dtype; bf16/fp16: autocast over fp32 weights (`generate`: weights cast, no autocast)."""
    device: DeviceName = DeviceName["auto"]
    """`auto` (cuda if present, else cpu; under launcher=slurm always cuda), `cpu` or `cuda`."""
    warmup: int = 3
    """Untimed steps per side after the first (compiling) call."""
    repeats: int = 10
    """Timed repetitions; each times one eager and one compiled block, in alternating order."""
    steps_per_repeat: int = 3
    """Steps per timed block (k)."""
    sync_each_step: bool = False
    """Time each step alone, between two device syncs, by the host's clock (as PyTorch's harness and a
    loop that reads every step's output pay it); false: CUDA events between back-to-back steps, one
    sync a block (a loop that never waits on the device: the host's next launch overlaps this step)."""
    bootstrap: int = 2000
    """Bootstrap resamples for the speedup's 95% confidence interval."""
    processes: int | None = None
    """Processes that each measure the paired repetitions (the CI spans them); null: 3 on GPU, 1 on CPU."""
    sides: SidesMode = SidesMode["auto"]
    """`paired` (one process, interleaved), `apart` (each side alone), `auto` (apart if they do not fit)."""
    parity: bool = True
    """Check numerical parity of compiled against eager (and fp64 where affordable)."""
    fp64_max_params: int = 50_000_000
    """Largest model (parameters) that also gets an fp64 reference."""
    parity_multiplier: float = 3.0
    """fp64 rule: compiled error must be within this multiple of eager's own error (+ tol/10)."""
    explain: bool = True
    """Run torch._dynamo.explain for graph breaks and their reasons."""
    seed: int = 0
    """Seed for weights and inputs."""
    timeout_s: float = 900.0
    """Wall-clock limit of one job attempt; past it the job is `timeout`."""
    lr: float = 1e-4
    """AdamW learning rate for `train`."""
    convergence_steps: int = 0
    """`train`: eager, compiled and a second eager copy (batch permuted: another reduction order)
    train N steps from identical weights on one data stream; 0 skips the check."""
    measure_peaks: bool = False
    """Measure this node's matmul TFLOP/s and copy bandwidth once (cached in SWEEP/peaks/); MFU uses them."""
    profile: bool = False
    """After the timed phase, an untimed torch.profiler pass per side (kernels, busy time, roofline)."""
    memory: bool = True
    """One GPU: each side's peak memory from a fresh process holding only that side (the first two
    paired processes, before they make the other side; else a process of its own per side)."""
    matmul_precision: MatmulPrecision = MatmulPrecision["highest"]
    """fp32 matmuls of both sides: `highest` (torch's default), `high` (TF32, as PyTorch's harness)."""
    sdp_reduced_math: bool = False
    """Let the math attention kernel reduce in bf16/fp16 (`true`: as PyTorch's harness sets it)."""

    def __post_init__(self) -> None:
        check_min("bench.warmup", self.warmup, 0)
        check_min("bench.repeats", self.repeats, 2)
        check_min("bench.steps_per_repeat", self.steps_per_repeat, 1)
        check_min("bench.bootstrap", self.bootstrap, 100)
        check_min("bench.processes", self.processes, 1)
        check_min("bench.timeout_s", self.timeout_s, 0, strict=True)
        check_min("bench.parity_multiplier", self.parity_multiplier, 1)
        check_min("bench.convergence_steps", self.convergence_steps, 0)


@dataclass
class GenerateConfig:
    """`bench.task=generate`: a prompt of `prompt_len` tokens at `workload.batch_size`, then
    `new_tokens` greedy tokens over a KV cache, as a server runs a decoder (job/phases/generation.py)."""

    prompt_len: int = 64
    """Prompt tokens per request (P): the prefill's length."""
    new_tokens: int = 32
    """Tokens generated per request (N), the first by the prefill; the headline's step is one decode token."""
    cache: GenCache = GenCache["static"]
    """`static` (preallocated to P + N, fixed shapes, as gpt-fast) or `dynamic` (grows a token per step)."""
    compiled: GenCompiled = GenCompiled["both"]
    """What the compiled side compiles: the prefill and the decode step (`both`), or only one of them."""

    def __post_init__(self) -> None:
        check_min("generate.prompt_len", self.prompt_len, 1)
        check_min("generate.new_tokens", self.new_tokens, 1)


@dataclass
class ParallelConfig:
    """Data-parallel strategy; one submitit job, one task per rank."""

    strategy: Strategy = Strategy["none"]
    """`none`, `ddp` (DistributedDataParallel) or `fsdp` (FSDP2 fully_shard)."""
    ranks_per_node: int = 1
    """Processes per node (one per GPU on GPU hosts)."""
    nodes: int = 1
    """Nodes (Slurm only for more than one)."""
    backend: DistBackend = DistBackend["auto"]
    """`auto`: nccl with one GPU per rank; gloo on CPU, or where ranks share a GPU (nccl refuses)."""

    def __post_init__(self) -> None:
        check_min("parallel.ranks_per_node", self.ranks_per_node, 1)
        check_min("parallel.nodes", self.nodes, 1)
        if self.strategy != "none" and self.ranks_per_node * self.nodes < 2:
            raise ConfigError(
                f"parallel.strategy={self.strategy} needs at least 2 ranks; "
                "set parallel.ranks_per_node>=2 or parallel.nodes>=2"
            )

    @property
    def world_size(self) -> int:
        # `none` always runs one rank, so a sweep over strategies can share ranks_per_node.
        return 1 if self.strategy == "none" else self.ranks_per_node * self.nodes


@dataclass
class LauncherConfig:
    """Where jobs run: submitit's local, Slurm or in-process debug executor."""

    name: LauncherName = LauncherName["local"]
    """`local` (one subprocess per job), `slurm` (one array on a cluster) or `debug` (in-process)."""
    max_parallel: int | None = None
    """Jobs at once; null: one per free GPU on a GPU host, 1 on CPU (timings stay clean)."""
    fork_server: bool | None = None
    """Local launcher: each fresh process of a job is a fork of one process per sweep that has done
    the imports (job/processes/fork_server.py), not a new interpreter; null: for CPU jobs only (on the H200
    forked jobs' steps read slower: benchmarks/h200-time-to-answer/run4-ab)."""
    start_ahead: bool = False
    """Local launcher, where the fork server is off: each fresh process of a job is a new interpreter
    the sweep started ahead, whose imports ran while the previous one worked (processes/fork_server.py)."""
    overlap: bool = False
    """Local launcher: two jobs per GPU (two on a CPU host), each measuring alone: a job takes its
    device's node-local lock (job/processes/device_lock.py) before it first touches the device and holds it
    until its process ends, so only start-up, set-up and imports run beside another job's
    measurements. Off until a GPU measurement shows the figures unchanged (docs/statistics.md)."""
    max_requeues: int = 1
    """Times a job that hit its time limit or was preempted is requeued before it is `timeout`."""
    poll_s: float = 0.5
    """Seconds between status polls while waiting."""
    partition: str | None = None
    """Slurm partition."""
    account: str | None = None
    """Slurm account."""
    qos: str | None = None
    """Slurm QOS."""
    time_min: int | None = None
    """Slurm time limit per job in minutes; null derives it from bench.timeout_s."""
    gpus_per_node: int | None = None
    """GPUs per node; null: one per rank when jobs use CUDA (`bench.device=cuda`, or `auto` under
    Slurm or on a GPU host), none for `bench.device=cpu`."""
    cpus_per_task: int | None = None
    """CPUs per task."""
    mem_gb: float | None = None
    """Memory per node in GB."""
    constraint: str | None = None
    """Slurm --constraint."""
    exclude: str | None = None
    """Slurm --exclude (nodes)."""
    array_parallelism: int = 256
    """Most array tasks Slurm runs at once, over all the sweep's arrays together."""
    max_array_size: int | None = None
    """Most tasks per Slurm array; null: the cluster's MaxArraySize (`scontrol show config`)."""
    job_name: str = "orchestrator"
    """Slurm job name (not `__main__`)."""
    additional_parameters: Any = None
    """Extra #SBATCH parameters, e.g. {mail_type: END}."""
    setup: list[str] = field(default_factory=list)
    """Shell lines run before the job, e.g. `module load cuda`."""
    python: str | None = None
    """Python executable on the cluster; null: this interpreter."""

    def __post_init__(self) -> None:
        if self.additional_parameters is not None and not isinstance(self.additional_parameters, dict):
            raise ConfigError("launcher.additional_parameters must be a mapping, e.g. {mail_type: END}")
        if self.overlap and self.name != "local":
            raise ConfigError(f"launcher.overlap=true needs launcher=local (got launcher={self.name})")
        if self.overlap and (self.max_parallel is not None or (self.gpus_per_node or 0) > 1):
            raise ConfigError(
                "launcher.overlap=true places two single-GPU jobs per GPU: leave launcher.max_parallel "
                f"unset and launcher.gpus_per_node at most 1 (got {self.max_parallel}, {self.gpus_per_node})"
            )
        check_min("launcher.max_parallel", self.max_parallel, 1)
        check_min("launcher.max_requeues", self.max_requeues, 0)
        check_min("launcher.time_min", self.time_min, 1)
        check_min("launcher.gpus_per_node", self.gpus_per_node, 0)
        check_min("launcher.array_parallelism", self.array_parallelism, 1)
        check_min("launcher.max_array_size", self.max_array_size, 1)


@dataclass
class LoggerConfig:
    """wandb logging."""

    mode: LoggerMode = LoggerMode["offline"]
    """`offline` (files in the sweep dir, sync later), `online` or `disabled`."""
    project: str = "orchestrator"
    """wandb project."""
    entity: str | None = None
    """wandb entity (team or user)."""


@dataclass
class RetryConfig:
    """Retry policy for failed jobs, within one sweep invocation."""

    max_retries: int = 0
    """Extra attempts for a failed job whose class is in `on`."""
    on: list[FailureClass] = field(
        default_factory=lambda: cast(list[FailureClass], ["crash", "timeout", "oom"])
    )
    """Failure classes worth retrying."""

    def __post_init__(self) -> None:
        check_min("retry.max_retries", self.max_retries, 0)


@dataclass
class SweepConfig:
    """The sweep as a whole."""

    name: str = "default"
    """Sweep name: wandb group and default directory."""
    dir: str | None = None
    """Sweep directory; null: sweeps/<name>. Re-running into it skips finished jobs."""
    dry_run: bool = False
    """Print the planned jobs and exit."""
    rerun_failed: bool = False
    """Re-run jobs whose stored result is a failure (finished `ok` jobs are never re-run)."""
    detach: bool = False
    """Submit and return at once; ask later with `python -m orchestrator status DIR`."""
    report: bool = True
    """Write the dashboard at the end."""
    points: list[list[str]] = field(default_factory=list)
    """Points beside the grid, each a list of overrides on the sweep's fixed ones, not on the grid's
    axes (a point sets every axis it needs): [[generate.cache=dynamic, compile.dynamic=true]]."""


@dataclass
class CompareConfig:
    """Regression thresholds for `python -m orchestrator compare BASE CAND`."""

    speedup_drop: float = 0.05
    """Flag a speedup that fell by more than this fraction."""
    compile_rise: float = 0.20
    """Flag a compile time that rose by more than this fraction."""
    memory_rise: float = 0.10
    """Flag a peak memory that rose by more than this fraction."""
    step_rise: float = 0.05
    """Flag a compiled step time that rose by more than this fraction."""


@dataclass
class VerdictConfig:
    """The run the verdict is for (`python -m orchestrator verdict DIR verdict.steps=N` recomputes it)."""

    steps: int = 10_000
    """Steps (train), calls (infer) or decode steps (generate) of the run that would pay the compile back."""
    serve_s: float | None = None
    """`infer` and `generate`: seconds of serving at full load instead (what eager serves in that time:
    calls, or generate's whole requests)."""
    requests: int | None = None
    """`generate`: the run is this many requests (a prefill and every decode token each), judged on a
    whole request's speedup and its CI instead of the per-token headline."""
    cache: VerdictCache = VerdictCache["cold"]
    """Compile cost the run pays: `cold` (an empty cache) or `warm` (a restart on a filled cache)."""
    max_ci_width: float = 0.25
    """No answer when the named setting's speedup CI is wider than this fraction of its speedup."""
    control_tolerance: float = 0.02
    """No answer when the eager-against-eager control's CI lies wholly beyond 1 +/- this."""
    follow_up: bool = True
    """After the sweep, follow-up jobs per model: the named setting with the lever of its largest
    measured cause, then each next cause's lever stacked on what gained (analysis/stack.py), so that
    the verdict gives the best setting found beside your settings' answer; false: none."""
    max_follow_ups: int = 3
    """Follow-up steps per model at most (0: none)."""

    profile: bool = True
    """The untimed profile pass in every compiled one-process job (not generate) for the verdict's causes:
    GPU busy, kernels, where the time went; about 1 s a job on an H200. Not in the job's id; no trace
    and no roofline bytes (bench.profile=true adds them)."""

    def __post_init__(self) -> None:
        check_min("verdict.steps", self.steps, 1)
        check_min("verdict.serve_s", self.serve_s, 0, strict=True)
        check_min("verdict.requests", self.requests, 1)
        check_min("verdict.max_follow_ups", self.max_follow_ups, 0)
        check_min("verdict.max_ci_width", self.max_ci_width, 0, strict=True)
        check_min("verdict.control_tolerance", self.control_tolerance, 0)


@dataclass
class EnvConfig:
    """The Python environment a job measures in: an axis for the upgrade A/B (analysis/upgrade.py)."""

    python: str | None = None
    """The interpreter the job's worker runs in (another venv's `bin/python`, with its own torch);
    null: the orchestrator's own. Sweep two for an A/B: `env.python=/a/bin/python,/b/bin/python`."""
    name: str | None = None
    """The environment's name in tables and the A/B; null: the venv's folder (`/x/venv-b/bin/python`
    is `venv-b`), or nothing when `python` is null."""

    def __post_init__(self) -> None:
        if self.python is not None and self.name is None:
            self.name = env_name(self.python)


def env_name(python: str) -> str:
    """An interpreter's default name: the folder that holds its `bin/` (a venv's), else its path."""
    path = Path(python)
    return path.parent.parent.name if path.parent.name == "bin" and path.parent.parent.name else python


@dataclass
class Config:
    """The whole composed config."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    compile: CompileConfig = field(default_factory=CompileConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)
    verdict: VerdictConfig = field(default_factory=VerdictConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)

    def __post_init__(self) -> None:
        if self.parallel.world_size > 1 and self.parallel.nodes > 1 and self.launcher.name != "slurm":
            raise ConfigError(
                f"parallel.nodes={self.parallel.nodes} needs launcher=slurm (local runs one node)"
            )
        if self.launcher.overlap and self.parallel.world_size > 1:
            raise ConfigError(
                f"launcher.overlap=true runs single-process jobs only (parallel.strategy="
                f"{self.parallel.strategy} starts {self.parallel.world_size} ranks); "
                "set launcher.overlap=false"
            )
        if self.compile.optimizer and self.bench.task != "train":
            raise ConfigError("compile.optimizer=true compiles the optimizer step: it needs bench.task=train")
        if self.compile.freezing and self.bench.task != "infer":
            raise ConfigError("compile.freezing=true works only with bench.task=infer")
        if self.bench.convergence_steps and (self.bench.task != "train" or self.parallel.strategy == "fsdp"):
            raise ConfigError(
                f"bench.convergence_steps={self.bench.convergence_steps} trains the model: it needs "
                f"bench.task=train and parallel none or ddp (got task={self.bench.task}, "
                f"parallel={self.parallel.strategy}); set bench.convergence_steps=0"
            )
        if self.compile.path == "aoti":
            self._check_aoti()
        if self.bench.task == "generate":
            self._check_generate()

    def time_limit_s(self) -> float:
        """A job's time limit per attempt: `bench.timeout_s`, twice that under `launcher.overlap`, where
        the job may first wait up to `bench.timeout_s` for its device's lock
        (job/processes/device_lock.py)."""
        return self.bench.timeout_s * (2 if self.launcher.overlap else 1)

    def _check_generate(self) -> None:
        w, c = self.workload, self.compile
        if w.name not in ("gpt", "hf"):
            raise ConfigError(
                f"bench.task=generate runs a decoder with a KV cache: it needs workload=gpt or workload=hf "
                f"(a causal LM), got workload={w.name}"
            )
        if self.parallel.strategy != "none" or c.path != "jit" or c.scope != "model" or w.shapes:
            raise ConfigError(
                "bench.task=generate needs parallel=none, compile.path=jit, compile.scope=model and no "
                f"workload.shapes (got parallel={self.parallel.strategy}, compile.path={c.path}, "
                f"compile.scope={c.scope}, workload.shapes={list(w.shapes)})"
            )
        if self.generate.cache == "dynamic" and c.mode in CUDAGRAPH_MODES and self.bench.device != "cpu":
            raise ConfigError(
                f"generate.cache=dynamic with compile.mode={c.mode}: CUDA graphs would replay a decode step "
                "whose cache is its own output, overwritten by the next replay; choose generate.cache=static "
                "or compile.mode=default (or bench.device=cpu, where the mode has no CUDA graphs)"
            )
        if c.optimizer or c.freezing or self.bench.convergence_steps:
            raise ConfigError(
                "bench.task=generate trains nothing and freezes nothing: set compile.optimizer=false, "
                "compile.freezing=false and bench.convergence_steps=0"
            )
        b = self.bench
        if (b.processes or 1) > 1 or b.sides == "apart" or b.profile:
            raise ConfigError(
                "bench.task=generate measures in the job's one process, without the profile pass: set "
                f"bench.processes=1, bench.sides=auto and bench.profile=false (got processes={b.processes}, "
                f"sides={b.sides}, profile={b.profile})"
            )

    def _check_aoti(self) -> None:
        c = self.compile
        if self.bench.task != "infer":
            raise ConfigError("compile.path=aoti works only with bench.task=infer (an exported graph)")
        if c.mode not in ("default", "max-autotune-no-cudagraphs") or c.backend != "inductor":
            raise ConfigError(
                f"compile.path=aoti needs compile.mode=default or max-autotune-no-cudagraphs and "
                f"compile.backend=inductor (got mode={c.mode}, backend={c.backend})"
            )
        if c.scope != "model" or self.parallel.strategy != "none" or self.workload.shapes:
            raise ConfigError(
                "compile.path=aoti packages the whole model for fixed shapes: it needs compile.scope=model, "
                "parallel=none and no workload.shapes"
            )


# The parts of a config that change what a job measures; the job id hashes exactly these (and `env`
# where a job names an interpreter of its own: config/plan.py).
MEASURED_SECTIONS = ("workload", "compile", "bench", "parallel")
