"""`gpuctl`: the command line over the REST API: login, projects, quota, jobs (--watch), submit
(every spec field, --template), templates, logs -f, cancel, usage.

It talks HTTP only (httpx; no Django, no Celery) and keeps its token in
~/.config/gpuctl/config.json (mode 0600; GPUCTL_CONFIG overrides the path). Modules: `http`
(config, client, exit codes), `cli` (parser, main, account commands), `jobs`, `submit`.
"""

from gpuctl.cli import main, parser
from gpuctl.http import EPILOG, CliError, ExitCode, config_path

__all__ = ["EPILOG", "CliError", "ExitCode", "config_path", "main", "parser"]
