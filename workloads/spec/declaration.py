"""The job spec, declared once: what a user may ask of a job, with its types, bounds, defaults and words.

Everything else about the spec derives from these Structs: the strict parser (`parser.py`, with the
project's rules in `rules.py`), the API schema (`schema.py`), the submit form's fields (`form.py`), the
request a rerun or a template copies (`request.py`), the Job row's columns (`workloads.models.Job`)
and the Kubernetes Job (`workloads.k8s.builders.build_job`). Adding a field is one edit here;
`workloads/tests/test_spec_walk.py` fails until every derivation carries it, or the field is marked
as outside one of them (the `Hints` below).

A field's Meta holds what a person reads: `title` (the form's label), `description` (the API's text)
and `examples` (a valid value other than the default, which the walk test submits). Integers are
bounded with `ge` and `le` only. Its `extra` holds `{HINTS: Hints(...)}`: what the derivations need
beyond the type.

Pure: no database, no cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from workloads import app_settings
from workloads.choices import Placement, Priority

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
# The cluster's, the GPU stack's and the device plugin's own (GPU_PORTAL_DEVICE_IDS says which GPUs a
# process was given; the node agent reads it to attribute usage).
RESERVED_ENV_PREFIXES = ("KUBERNETES_", "NVIDIA_", "CUDA_", "GPU_PORTAL_")
# What each worker of a job of several is told about the others (workloads.k8s.builders.launch_env):
# such a job's env may not set them.
LAUNCH_ENV = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "NODE_RANK",
    "RANK",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)
GPU_TYPE = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$"
MOUNT_PATH = r"^/[A-Za-z0-9._/-]{0,250}$"
NO_NUL = r"^[^\x00]*$"  # Postgres text cannot hold NUL
MAX_LIST, MAX_STR = 64, 4096
QUOTA_CEILING = 2**31 - 1  # the quota columns' ceiling; a project's quota is the real maximum
IMAGE_HELP = (
    "A full reference registry/repository[:tag][@sha256:digest]. Only images on the project's "
    "allow-list (exact registry and repository, set by operators) are accepted; a refused image's "
    "error names the allowed ones."
)
HINTS = "hints"

# How the submit form edits a field: one input of its type; a list of words, shell-quoted; a list of
# NAME=value lines; rows the form lays out itself (volumes); one input per field of a nested Struct;
# or not at all.
FormWidget = Literal["input", "shell", "lines", "rows", "fields", "none"]


@dataclass(frozen=True)
class Hints:
    """What a field's derivations need beyond its type (Meta `extra={HINTS: Hints(...)}`)."""

    # The parser's message for a value of the wrong type, shape or length ("": one derived from the
    # type); `{max_length}` is replaced by the declared one.
    invalid: str = ""
    # At most the project's quota of the same name (accounts.models.Quota), and at most this site
    # setting whatever the project: the parser applies both, the schema and the form show them.
    quota: bool = False
    site_maximum: Callable[[], int] | None = None
    # build_job never reads it: why. The walk test checks that the manifest does not change with it.
    no_manifest: str = ""
    # Switched on by a site for its tests and demo only (the switch that does): not in the public API
    # schema, in the form only where the switch is on, and left out of a request (rerun, template)
    # while it has its default.
    tests_and_demo: app_settings.SiteSwitch | None = None
    form: FormWidget = "input"
    form_help: str | None = None  # the form's help text (None: the description)
    form_initial: Any = None  # what the empty form shows (None: the default)
    form_prefix: str = ""  # "fields": the form's names of the nested fields start with it


class EnvVar(Struct, frozen=True, forbid_unknown_fields=True):
    """One environment variable: a plain value, never a reference to a secret or a field."""

    name: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=128,
            pattern=ENV_NAME,
            description=(
                f"Letters, digits and '_'; {', '.join(RESERVED_ENV_PREFIXES[:-1])} and "
                f"{RESERVED_ENV_PREFIXES[-1]} names are reserved."
            ),
        ),
    ]
    value: Annotated[str, Meta(max_length=MAX_STR, pattern=NO_NUL)]


class VolumeMount(Struct, frozen=True, forbid_unknown_fields=True):
    """One of the project's volumes mounted into the container."""

    volume: Annotated[
        str, Meta(min_length=1, title="Volume", description="One of the project's volumes, by name.")
    ]
    mount_path: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=251,
            pattern=MOUNT_PATH,
            title="Mount path",
            description="Absolute, without '..'; not /, /proc, /sys, /dev, /etc, /usr …",
            extra={HINTS: Hints(form_help="e.g. /data")},
        ),
    ]
    read_only: Annotated[
        bool, Meta(title="Read-only", description="A volume the operators made read-only is always so.")
    ] = False


class Simulation(Struct, frozen=True, forbid_unknown_fields=True):
    """How a simulated pod runs and ends (job simulation on the local cluster's kwok nodes)."""

    run_seconds: (
        Annotated[
            int,
            Meta(
                ge=0,
                le=86400,
                title="Simulated run time (s)",
                extra={HINTS: Hints(invalid="run_seconds must be a whole number of seconds.")},
            ),
        ]
        | None
    ) = None
    exit_code: (
        Annotated[
            int,
            Meta(
                ge=0,
                le=255,
                title="Simulated exit code",
                extra={HINTS: Hints(invalid="exit_code must be between 0 and 255.")},
            ),
        ]
        | None
    ) = None


Word = Annotated[str, Meta(max_length=MAX_STR, pattern=NO_NUL)]


class JobSpec(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A job spec: typed fields only, never a raw pod spec (an unknown key is refused).

    The fields' order is the form's and the schema's.
    """

    name: Annotated[
        str,
        Meta(
            max_length=80,
            pattern=NO_NUL,
            title="Job name",
            examples=["resnet-50"],
            extra={HINTS: Hints(no_manifest="pages and the API show it; the cluster names jobs by uid")},
        ),
    ] = ""
    image: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=300,
            title="Image",
            description=IMAGE_HELP,
            examples=["registry.example.com/team/train:2.0"],
            extra={
                HINTS: Hints(
                    invalid="Name an image, e.g. registry.example.com/team/train:1.0.",
                    form_help="From the project's allow-list, e.g. registry.example.com/team/train:1.0",
                )
            },
        ),
    ]
    command: Annotated[
        list[Word],
        Meta(
            max_length=MAX_LIST,
            title="Command",
            examples=[["python", "train.py"]],
            extra={
                HINTS: Hints(
                    form="shell", form_help="Command and arguments, shell-quoted (no shell runs it)."
                )
            },
        ),
    ] = []
    args: Annotated[
        list[Word],
        Meta(
            max_length=MAX_LIST,
            title="Arguments",
            examples=[["--epochs", "3"]],
            extra={
                HINTS: Hints(
                    form="shell",
                    form_help="Passed to the image's entrypoint (or after the command), shell-quoted.",
                )
            },
        ),
    ] = []
    env: Annotated[
        list[EnvVar],
        Meta(
            max_length=MAX_LIST,
            title="Environment",
            examples=[[{"name": "EPOCHS", "value": "3"}]],
            extra={
                HINTS: Hints(
                    invalid="Must be a list of at most {max_length} {{name, value}} pairs.",
                    form="lines",
                    form_help="NAME=value, one per line.",
                )
            },
        ),
    ] = []
    workers: Annotated[
        int,
        Meta(
            ge=1,
            le=QUOTA_CEILING,
            title="Workers",
            description=(
                "Pods that run together, each with the GPUs, CPU and memory below (a training run across "
                "nodes: torchrun, MPI). All start together or none does; one that fails fails the job."
            ),
            examples=[2],
            extra={
                HINTS: Hints(
                    site_maximum=app_settings.max_workers_per_job,
                    form_help="1 for an ordinary job; more: each worker gets the GPUs below, on one node.",
                )
            },
        ),
    ] = 1
    gpus: Annotated[
        int,
        Meta(
            ge=0,
            le=QUOTA_CEILING,
            title="GPUs",
            description="Whole GPUs on one node (per worker).",
            examples=[2],
            extra={
                HINTS: Hints(
                    quota=True, site_maximum=app_settings.max_gpus_per_job, form_help="", form_initial=1
                )
            },
        ),
    ] = 0
    gpu_type: Annotated[
        str,
        Meta(
            max_length=63,
            pattern=f"^({GPU_TYPE.strip('^$')})?$",  # empty: any type
            title="GPU type",
            description="A GPU product such as NVIDIA-GeForce-RTX-5090.",
            examples=["NVIDIA-GeForce-RTX-5090"],
            extra={
                HINTS: Hints(
                    invalid="A GPU product name such as NVIDIA-GeForce-RTX-5090.",
                    form_help="e.g. NVIDIA-GeForce-RTX-5090; empty: any.",
                )
            },
        ),
    ] = ""
    mps_slices: Annotated[
        int,
        Meta(
            ge=0,
            le=QUOTA_CEILING,
            title="MPS slices",
            description="MPS slices of a shared GPU, instead of whole GPUs.",
            examples=[2],
            extra={HINTS: Hints(quota=True, form_help="Instead of whole GPUs: MPS slices.")},
        ),
    ] = 0
    cpu_millicores: Annotated[
        int,
        Meta(
            ge=100,
            le=QUOTA_CEILING,
            title="CPU (millicores)",
            examples=[2000],
            extra={HINTS: Hints(quota=True, form_help="")},
        ),
    ] = 1000
    memory_mib: Annotated[
        int,
        Meta(
            ge=64,
            le=QUOTA_CEILING,
            title="Memory (MiB)",
            examples=[8192],
            extra={HINTS: Hints(quota=True, form_help="")},
        ),
    ] = 4096
    max_runtime_minutes: Annotated[
        int,
        Meta(
            ge=1,
            le=QUOTA_CEILING,
            title="Longest run (minutes)",
            examples=[120],
            extra={HINTS: Hints(quota=True, form_help="")},
        ),
    ] = 60
    priority: Annotated[
        Priority,
        Meta(
            title="Priority",
            examples=["high"],
            extra={HINTS: Hints(no_manifest="the admission queue orders by it")},
        ),
    ] = Priority.NORMAL
    preemptible: Annotated[
        bool,
        Meta(
            title="Preemptible",
            description="May borrow idle quota of others, and be preempted with notice.",
            examples=[True],
            extra={HINTS: Hints(no_manifest="the admission queue lends it idle quota", form_help="")},
        ),
    ] = False
    interactive: Annotated[
        bool,
        Meta(
            title="Interactive",
            description="A notebook or shell someone works in: idle reclaim judges it over the longer "
            "interactive window (or not at all), see GET /api/v1/projects/{slug}/idle-reclaim/.",
            examples=[True],
            extra={
                HINTS: Hints(
                    no_manifest="idle reclaim judges it over its own window",
                    form_help="A notebook or shell you work in: judged idle over a longer window.",
                )
            },
        ),
    ] = False
    volumes: Annotated[
        list[VolumeMount],
        Meta(
            max_length=16,
            title="Volumes",
            examples=[[{"volume": "data", "mount_path": "/data", "read_only": True}]],
            extra={HINTS: Hints(invalid="Must be a list of at most {max_length} volumes.", form="rows")},
        ),
    ] = []
    placement: Annotated[
        Placement,
        Meta(
            title="Placement",
            description="Empty: any ordinary GPU node; 'real-node': the local cluster's real node.",
            examples=["real-node"],
            extra={
                HINTS: Hints(
                    invalid=f"Leave it out, or {Placement.REAL_NODE.value!r} (tests and demo only).",
                    tests_and_demo="real_node",
                )
            },
        ),
    ] = Placement.ANY
    simulate: Annotated[
        Simulation | None,
        Meta(
            title="Simulation",
            examples=[{"run_seconds": 30, "exit_code": 1}],
            extra={HINTS: Hints(tests_and_demo="simulation", form="fields", form_prefix="sim_")},
        ),
    ] = None
