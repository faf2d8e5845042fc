"""REST API for accounts: me, my notification choices, my projects, their memberships, my tokens."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from accounts import selectors, services
from accounts.choices import NotifyEvent, Role, TokenScope
from accounts.models import ApiToken, Membership, Project, Quota, User


def request_user(request: Request) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - permission classes guarantee an authenticated User
    return user


class QuotaSerializer(serializers.ModelSerializer[Quota]):
    class Meta:
        model = Quota
        fields = [
            "gpus",
            "mps_slices",
            "cpu_millicores",
            "memory_mib",
            "max_concurrent_jobs",
            "max_runtime_minutes",
        ]
        read_only_fields = fields


class ProjectSerializer(serializers.ModelSerializer[Project]):
    quota = QuotaSerializer(read_only=True)
    namespace = serializers.CharField(read_only=True)
    my_role = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["slug", "name", "description", "namespace", "quota", "my_role", "created_at"]
        read_only_fields = fields

    def get_my_role(self, project: Project) -> str | None:
        if hasattr(project, "role_of_user"):  # annotated by selectors.project_list_with_role
            return Role(project.role_of_user).value if project.role_of_user else None
        role = selectors.project_role(user=self.context["request"].user, project=project)
        return role.value if role else None


class MeSerializer(serializers.ModelSerializer[User]):
    class Meta:
        model = User
        fields = ["id", "username", "email", "first_name", "last_name", "is_staff", "notify_by_email"]
        read_only_fields = fields


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "email", "role", "created_at"]
        read_only_fields = ["id", "email", "created_at"]


class MembershipCreateSerializer(serializers.Serializer[Any]):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)


class TokenSerializer(serializers.ModelSerializer[ApiToken]):
    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "scopes",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "last_used_ip",
        ]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=80)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=TokenScope.choices), min_length=1)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


class TokenCreatedSerializer(TokenSerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class MeView(GenericAPIView[User]):
    serializer_class = MeSerializer

    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request_user(request)).data)


def _shape_errors(body: Any, fields: dict[str, type], what: str) -> dict[str, Any]:
    """What is wrong with `body` as an object holding exactly `fields`, each of its JSON type."""
    if not isinstance(body, dict):
        return {"non_field_errors": [f"Send a JSON object: {what}."]}
    errors: dict[str, Any] = {str(k)[:60]: [f"Unknown field; {what}."] for k in body if k not in fields}
    for key, kind in fields.items():
        if key not in body:
            errors[key] = ["Required."]
        elif not isinstance(body[key], kind):
            errors[key] = ["Must be true or false." if kind is bool else "Must be an object."]
    return errors


class NotificationEventsSerializer(serializers.Serializer[Any]):
    """One boolean per kind of job event: does it email me."""

    rejects_unknown_fields = True  # the schema says so (portal.api.schema)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {value: serializers.BooleanField(help_text=label) for value, label in NotifyEvent.choices}


class NotificationsSerializer(serializers.Serializer[Any]):
    rejects_unknown_fields = True
    email = serializers.BooleanField(help_text="Off: none of my job events email me.")
    events = NotificationEventsSerializer(help_text="Which job events email me (with `email` on).")


EVENTS = ", ".join(NotifyEvent.values)


def notifications_of(user: User) -> dict[str, Any]:
    return {"email": user.notify_by_email, "events": user.email_events()}


class NotificationsView(GenericAPIView[User]):
    """Which of my job events email me; PUT replaces the choice, naming `email` and every event."""

    serializer_class = NotificationsSerializer
    write_scope = TokenScope.ADMIN  # like the other account settings a token may change

    def get(self, request: Request) -> Response:
        return Response(notifications_of(request_user(request)))

    @extend_schema(request=NotificationsSerializer, responses={200: NotificationsSerializer})
    def put(self, request: Request) -> Response:
        body = request.data
        errors = _shape_errors(body, {"email": bool, "events": dict}, "a choice has email and events")
        events = body.get("events") if not errors else None
        inner = _shape_errors(events, dict.fromkeys(NotifyEvent.values, bool), "events are " + EVENTS)
        if errors or inner or not isinstance(events, dict):
            raise ValidationError(errors if errors else {"events": inner})
        user = services.user_set_notifications(
            user=request_user(request), email=body["email"], events=events, request=request
        )
        return Response(notifications_of(user))


class ProjectViewSet(viewsets.ReadOnlyModelViewSet[Project]):
    serializer_class = ProjectSerializer
    lookup_field = "slug"
    lookup_value_regex = "[a-z0-9-]+"

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Project.objects.none()
        return selectors.project_list_with_role(user=request_user(self.request))


class MembershipViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Membership],
):
    serializer_class = MembershipSerializer
    write_scope = TokenScope.ADMIN

    def project(self) -> Project:
        return selectors.project_get(user=request_user(self.request), slug=self.kwargs["project_slug"])

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return selectors.membership_list(project=self.project())

    @extend_schema(request=MembershipCreateSerializer, responses={201: MembershipSerializer})
    def create(self, request: Request, project_slug: str) -> Response:
        data = MembershipCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = self.project()
        # Before the lookup: else any member could learn which emails have accounts.
        services.require_manager(actor=request_user(request), project=project)
        user = User.objects.filter(email__iexact=data.validated_data["email"], is_active=True).first()
        if user is None:
            raise serializers.ValidationError({"email": ["No active user has this email address."]})
        membership = services.membership_add(
            actor=request_user(request),
            project=project,
            user=user,
            role=Role(data.validated_data["role"]),
            request=request,
        )
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, project_slug: str, pk: str) -> Response:
        membership = self.get_object()
        data = MembershipSerializer(membership, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        role = data.validated_data.get("role", membership.role)
        services.membership_update(
            actor=request_user(request), membership=membership, role=Role(role), request=request
        )
        return Response(MembershipSerializer(membership).data)

    def perform_destroy(self, instance: Membership) -> None:
        services.membership_remove(
            actor=request_user(self.request), membership=instance, request=self.request
        )


class TokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[ApiToken],
):
    serializer_class = TokenSerializer
    write_scope = TokenScope.ADMIN
    throttle_scope = "token_create"
    throttle_classes = [ScopedRateThrottle]

    def get_throttles(self) -> Any:
        return super().get_throttles() if self.action == "create" else []

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return selectors.token_list(user=request_user(self.request), revoked=False)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, secret = services.token_create(
            user=request_user(request),
            request=request,
            name=data.validated_data["name"],
            scopes=data.validated_data["scopes"],
            expires_at=data.validated_data.get("expires_at"),
            parent=request.auth if isinstance(request.auth, ApiToken) else None,
        )
        body = dict(TokenSerializer(token).data, secret=secret)
        return Response(body, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, pk: str) -> Response:
        token = self.get_object()  # DRF's lookup: a pk that is not a number is a 404, not a 500
        services.token_revoke(actor=request_user(request), token=token, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)
