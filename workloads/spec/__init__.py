"""The job spec: declared once (`declaration`), and what derives from it without Django's database or
the cluster: the parser (`parser`, `checks`, `rules`, `limits`) and the request shape (`request`). The
API schema (`schema`) and the form's fields (`form`) are imported from their modules by the API and
the pages."""

from workloads.spec.declaration import EnvVar, JobSpec, Simulation, VolumeMount
from workloads.spec.limits import SpecLimits, quota_maxima, quota_totals
from workloads.spec.parser import parse_spec
from workloads.spec.request import spec_from_values, spec_request, spec_values

__all__ = [
    "EnvVar",
    "JobSpec",
    "Simulation",
    "SpecLimits",
    "VolumeMount",
    "parse_spec",
    "quota_maxima",
    "quota_totals",
    "spec_from_values",
    "spec_request",
    "spec_values",
]
