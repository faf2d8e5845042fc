"""`manage.py node_token <node>`: create a node agent token and print its secret once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gpu import services
from gpu.models import Node


class Command(BaseCommand):
    help = "Create a node-scoped agent token (writes telemetry for that node only); prints the secret once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("node", help="Node name as the cluster knows it")
        parser.add_argument("--name", default="agent", help="A label for the token")
        parser.add_argument(
            "--create-node", action="store_true", help="Create the Node row if not mirrored yet"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = str(options["node"])
        node = Node.objects.filter(name=name, deleted=False).first()
        if node is None and options["create_node"]:
            node = Node.objects.create(name=name)
        if node is None:
            raise CommandError(f"No node {name!r} (is the controller running? or pass --create-node).")
        _, secret = services.node_token_create(node=node, name=str(options["name"]))
        self.stdout.write(secret)
