"""The parts the adapter core is made of, built once and handed to whoever composes them.

Each part owns its state (the pipeline its conversion and numbering, the
emitter the line and the journal plan, the session driver the trading
session ...). :class:`CoreParts` only holds them together: the core and the
sides it is split into (:mod:`~adapter.core.driver`, :mod:`~adapter.core.reports`,
:mod:`~adapter.core.command_desk`) reach a part through it, never through
each other's fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.conversion.state import ConversionState
from feedha.adapter.core.access_desk import AccessDesk
from feedha.adapter.core.busy import BusyDesk
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.conflated_side import ConflatedSide
from feedha.adapter.core.delayed_side import DelayedSide
from feedha.adapter.core.emitter import LineEmitter
from feedha.adapter.core.gaps import GapDesk
from feedha.adapter.core.health import HealthMeter
from feedha.adapter.core.journaling import JournalPlan
from feedha.adapter.core.output import LineOutput
from feedha.adapter.core.pipeline import Pipeline
from feedha.adapter.core.sequencer import Sequencer
from feedha.adapter.core.session_driver import SessionDriver

__all__ = ["CoreParts", "build_parts"]


@dataclass(frozen=True, slots=True)
class CoreParts:
    """The parts of one adapter core (references: each part changes only itself).

    Attributes:
        config: identity, numbering, timers and limits.
        engine: the conversion engine; ``state`` is its conversion state.
        emitter: the line and the journal plan behind the output gate.
        pipeline: conversion and numbering; ``sequencer`` is its numbering.
        sessions: the trading session and its boundaries.
        gaps: source gaps and the group's answers about them.
        access: when data-plane access and seal changes take effect.
        busy: busy turns on purpose (fault injection).
        health: the health meter.
        delayed: the delayed line and the group's purges.
        conflated: the conflation intervals (and the conflated line).
    """

    config: CoreConfig
    engine: ConversionEngine
    state: ConversionState
    emitter: LineEmitter
    pipeline: Pipeline
    sequencer: Sequencer
    sessions: SessionDriver
    gaps: GapDesk
    access: AccessDesk
    busy: BusyDesk
    health: HealthMeter
    delayed: DelayedSide
    conflated: ConflatedSide


def build_parts(config: CoreConfig, engine: ConversionEngine, *, now: float) -> CoreParts:
    """Make every part of a core for ``config`` at start-up (monotonic ``now``), as a backup that listens."""
    output = LineOutput(
        channel=config.channel_number,
        adapter=config.adapter,
        max_packet_bytes=config.max_packet_bytes,
        heartbeat_s=config.line_heartbeat_s,
    )
    journal = None
    if config.journal:
        every, interval = config.checkpoint_every, config.checkpoint_interval_s
        stream = config.source_stream_number
        journal = JournalPlan(
            source_stream=stream, checkpoint_every=every, checkpoint_interval_s=interval, now=now
        )
    emitter = LineEmitter(output, journal, source_stream=config.source_stream_number)
    emitter.close(confirmed=0, trusted=False)  # every adapter starts as a backup that listens
    pipeline = Pipeline(
        engine,
        emitter,
        source_stream=config.source_stream_number,
        max_source_gap=config.max_source_gap,
        jump_confirm=config.jump_confirm,
    )
    sessions = SessionDriver(config.adapter, config.session_schedule)
    engine.state.session = sessions.keeper.session.id
    conflated = ConflatedSide(
        config.conflate_interval_s,
        channel=config.channel_number,
        adapter=config.adapter,
        max_packet_bytes=config.max_packet_bytes,
        heartbeat_s=config.line_heartbeat_s,
    )
    return CoreParts(
        config=config,
        engine=engine,
        state=engine.state,
        emitter=emitter,
        pipeline=pipeline,
        sequencer=pipeline.sequencer,
        sessions=sessions,
        gaps=GapDesk(config.adapter),
        access=AccessDesk(),
        busy=BusyDesk(),
        health=HealthMeter(penalty=config.health_penalty, now=now),
        delayed=DelayedSide(config, now=now),
        conflated=conflated,
    )
