"""Which message models this client decodes: a route's model checked before its lines are joined.

A route names its blocks' model and the model's ``MAJOR.MINOR`` version
(docs/wire-format.md, "Message models"). This client decodes the models of
:data:`~feedha.proto.model.MODELS` at their major numbers; a newer minor number
only adds fields, which protobuf skips, so it is taken. A route from a server
that predates versions names none: that is version 1.0. Pure.
"""

from __future__ import annotations

from feedha.admin_client import Route
from feedha.client.errors import ModelVersionError
from feedha.proto.errors import ProtoError
from feedha.proto.model import MODELS, major_of

__all__ = ["check_model", "model_problem"]


def model_problem(route: Route) -> str | None:
    """Why this client cannot decode ``route``'s blocks, or ``None`` when it can."""
    model = MODELS.get(route.message_model)
    if model is None:
        return f"not a model this client knows ({', '.join(sorted(MODELS))})"
    try:
        major = major_of(route.model_version or "1.0")
    except ProtoError as exc:
        return str(exc)
    if major != model.major:
        return f"major version {major} is not the one this client decodes ({model.major}); upgrade the client"
    return None


def check_model(routes: tuple[Route, ...]) -> None:
    """Raise on the first route whose model this client cannot decode.

    Raises:
        ModelVersionError: naming the channel, the model, its version and why.
    """
    for route in routes:
        problem = model_problem(route)
        if problem is not None:
            raise ModelVersionError(route.channel_name, route.message_model, route.model_version, problem)
