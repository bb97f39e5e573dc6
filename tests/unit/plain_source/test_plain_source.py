"""The plain source's pure part: symbol split, message model, framing with malformed injection, pacing."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.formats.feedha_fix.parser import Converter
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.plain_source import (
    SENDER,
    PacingSchedule,
    PlainSource,
    SourceConfig,
    SourceSummary,
    SymbolModel,
    corrupt,
    parse_stream_range,
    plan_frames,
    split_symbols,
    symbol_names,
)
from feedha.plain_source.cli import config_from_args
from feedha.plain_source.source import _Lookahead
from feedha.proto.fix import SourceEntry, checksum, encode_market_data, split_messages
from feedha.transport.backpressure import BackpressureSender

EPOCH = 1_700_000_000_000_000_000


def model(seed: int = 3, streams: tuple[str, ...] = ("A-M", "N-Z"), symbols: int = 60) -> SymbolModel:
    return SymbolModel(streams=streams, symbol_count=symbols, seed=seed, epoch_ns=EPOCH)


def test_stream_ranges_and_split() -> None:
    assert parse_stream_range("A-M") == ("A", "M")
    assert parse_stream_range("Q") == ("Q", "Q")
    for bad in ("a-m", "M-A", "AB-C", "", "A-", "1-9"):
        with pytest.raises(ValueError, match="letter range"):
            parse_stream_range(bad)
    names = symbol_names(60)
    assert len(set(names)) == 60 and names[:3] == ["AAA", "BAA", "CAA"]
    assert symbol_names(60) == names  # deterministic
    first, second = split_symbols(names, ["A-M", "N-Z"])
    assert sorted(first + second) == sorted(names)
    assert all(s[0] <= "M" for s in first) and all(s[0] >= "N" for s in second)
    assert split_symbols(names, ["B-C"]) == [[s for s in names if s[0] in "BC"]]
    with pytest.raises(ValueError, match="overlap"):
        split_symbols(names, ["A-M", "M-Z"])


def test_model_numbers_each_stream_gap_free_and_converts() -> None:
    converter = Converter(ConverterTable.load())
    messages = list(itertools.islice(model(), 500))
    for stream in (0, 1):
        seqs = [m.source_seq for m in messages if m.stream == stream]
        assert seqs == list(range(1, len(seqs) + 1)) and seqs
    kinds: set[int] = set()
    for i, message in enumerate(messages):
        bodies, malformed = split_messages(message.data)
        assert malformed == 0 and len(bodies) == 1
        converted = converter.parse(bodies[0])
        assert converted.source_seq == message.source_seq
        assert converted.event_time_ns == EPOCH + i * 1_000_000
        assert ("A" <= converted.symbol[0] <= "M") == (message.stream == 0)
        kinds.update(entry.entry_type for entry in converted.entries)
        for entry in converted.entries:
            assert entry.price > 0 and entry.size > 0
    assert kinds == {1, 2, 3}  # bids, asks and trades all occur


def test_model_is_deterministic_by_seed() -> None:
    first = [m.data for m in itertools.islice(model(seed=9), 300)]
    assert first == [m.data for m in itertools.islice(model(seed=9), 300)]
    assert first != [m.data for m in itertools.islice(model(seed=10), 300)]


def test_model_has_bursts() -> None:
    converter = Converter(ConverterTable.load())
    symbols = [converter.parse(split_messages(m.data)[0][0]).symbol for m in itertools.islice(model(), 3000)]
    longest = max(len(list(group)) for _s, group in itertools.groupby(symbols))
    assert longest >= 5


def test_model_start_seq_and_empty_streams() -> None:
    m = SymbolModel(streams=("A-M", "N-Z"), symbol_count=30, seed=1, epoch_ns=0, start_seq=1000)
    assert min(msg.source_seq for msg in itertools.islice(m, 50)) == 1000
    with pytest.raises(ValueError, match="no symbol"):
        SymbolModel(streams=("Z",), symbol_count=3, seed=1, epoch_ns=0)


def test_corrupt_breaks_only_the_checksum() -> None:
    data = next(model()).data
    bodies, malformed = split_messages(corrupt(data) + data)
    assert (len(bodies), malformed) == (1, 1)
    assert len(corrupt(data)) == len(data)


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_plan_frames_batches_per_stream_and_injects_malformed(batch: int) -> None:
    messages = list(itertools.islice(model(), 100))
    frames, malformed = plan_frames(
        messages, stream_count=2, batch=batch, malformed_every=7, generated_before=0, rng=random.Random(1)
    )
    assert malformed == 100 // 7
    counted = 0
    received: dict[int, list[bytes]] = {0: [], 1: []}
    for stream, payload in frames:
        bodies, bad = split_messages(payload)
        counted += bad
        assert len(bodies) <= batch
        received[stream] += bodies
    assert counted == malformed
    for stream in (0, 1):
        expected = [split_messages(m.data)[0][0] for m in messages if m.stream == stream]
        assert received[stream] == expected  # every valid message, once, in order


def test_plan_frames_cadence_continues_across_calls() -> None:
    messages = list(itertools.islice(model(), 20))
    rng = random.Random(1)
    _frames, first = plan_frames(
        messages[:5], stream_count=2, batch=64, malformed_every=4, generated_before=0, rng=rng
    )
    _frames, second = plan_frames(
        messages[5:], stream_count=2, batch=64, malformed_every=4, generated_before=5, rng=rng
    )
    assert (first, second) == (1, 4)


def test_pacing_schedule_deadlines_and_bounded_catchup() -> None:
    schedule = PacingSchedule(rate=1000.0, max_burst=10, start=100.0)
    assert schedule.due(100.0) == 0
    assert schedule.next_deadline() == pytest.approx(100.001)
    assert schedule.due(100.0055) == 5
    schedule.take(5)
    assert schedule.due(100.0055) == 0
    assert schedule.next_deadline() == pytest.approx(100.006)
    # A 1 s stall: 995 owed, only max_burst sent at once, the rest forgiven.
    assert schedule.due(101.0055) == 10
    assert schedule.forgiven == 990
    schedule.take(10)
    assert schedule.due(101.0055) == 0
    assert schedule.due(101.0075) == 2  # back on the normal cadence
    unpaced = PacingSchedule(rate=0, max_burst=64, start=0.0)
    assert unpaced.due(0.0) == 64 and unpaced.next_deadline() == 0.0


def test_config_checks_and_command_line() -> None:
    with pytest.raises(ValueError, match="rate"):
        SourceConfig(rate=-1)
    with pytest.raises(ValueError, match="overlap"):
        SourceConfig(streams=("A-M", "K-Z"))
    with pytest.raises(ValueError, match="unknown stream"):
        SourceConfig(endpoints=(("X-Y", "tcp://127.0.0.1:1"),))
    config = config_from_args(
        ["--endpoint", "A-F=tcp://127.0.0.1:5000", "--endpoint", "G-Z=tcp://127.0.0.1:5001"]
    )
    assert config.streams == ("A-F", "G-Z") and config.endpoints[1] == ("G-Z", "tcp://127.0.0.1:5001")
    config = config_from_args(
        ["--streams", "A-C,D-Z", "--count", "5", "--batch", "2", "--malformed-every", "3"]
    )
    assert (config.streams, config.count, config.batch, config.malformed_every) == (("A-C", "D-Z"), 5, 2, 3)
    with pytest.raises(SystemExit):
        config_from_args(["--streams", "A-M,B-C"])


def test_summary_json() -> None:
    summary = SourceSummary(
        ("A-M", "N-Z"), {"A-M": "tcp://x:1"}, [3, 4], [3, 4], malformed=2, elapsed_s=1.23456
    )
    data = json.loads(summary.to_json())
    assert data["sent"] == 7 and data["malformed"] == 2 and data["elapsed_s"] == 1.235
    assert data["streams"]["N-Z"] == {"number": 2, "last_seq": 4, "sent": 4}
    assert "error" not in data


# --- the batch generator against a plain reference model ----------------------------------


class ReferenceModel:
    """The model written plainly: Random's own methods, proto.fix.encode_market_data.

    SymbolModel must give byte for byte what this gives, seed for seed (its
    fast path pulls the same Mersenne Twister words in bulk).
    """

    def __init__(
        self,
        *,
        streams: tuple[str, ...],
        symbol_count: int,
        seed: int,
        epoch_ns: int,
        step_ns: int,
        start_seq: int,
    ) -> None:
        self.rng = random.Random(seed)
        per_stream = split_symbols(symbol_names(symbol_count), streams)
        self.symbols = [(index, s) for index, names in enumerate(per_stream) for s in names]
        self.walks = {s: [self.rng.randint(1_000, 50_000), self.rng.randint(1, 5)] for _i, s in self.symbols}
        self.next_seq = [start_seq] * len(streams)
        self.epoch_ns, self.step_ns, self.index = epoch_ns, step_ns, 0
        self.burst_left, self.burst = 0, self.symbols[0]

    def __next__(self) -> tuple[int, int, bytes]:
        rng = self.rng
        if self.burst_left > 0:
            self.burst_left -= 1
            stream, symbol = self.burst
        else:
            stream, symbol = rng.choice(self.symbols)
            if rng.random() < 0.02:
                self.burst_left, self.burst = rng.randint(5, 20), (stream, symbol)
        walk = self.walks[symbol]
        walk[0] = max(100, walk[0] + rng.choice((-2, -1, 0, 0, 1, 2)))
        entries: list[SourceEntry] = []
        if rng.random() < 0.45 or self.burst_left:
            for _ in range(rng.randint(1, 3)):
                ticks = walk[0] + rng.randint(-1, 1)
                size = rng.choice((100, 500, 1000, 5000))
                entries.append(SourceEntry("2", f"{ticks // 100}.{ticks % 100:02d}", size))
        else:
            walk[1] = max(1, min(8, walk[1] + rng.randint(-1, 1)))
            bid = walk[0] - walk[1] // 2
            ask = bid + walk[1]
            bid_size, ask_size = rng.randint(1, 20) * 100, rng.randint(1, 20) * 100
            entries.append(SourceEntry("0", f"{bid // 100}.{bid % 100:02d}", bid_size))
            entries.append(SourceEntry("1", f"{ask // 100}.{ask % 100:02d}", ask_size))
        seq = self.next_seq[stream]
        self.next_seq[stream] += 1
        data = encode_market_data(
            source_seq=seq,
            symbol=symbol,
            event_time_ns=self.epoch_ns + self.index * self.step_ns,
            entries=entries,
            sender=SENDER,
        )
        self.index += 1
        return stream, seq, data


MODEL_CONFIGS = [
    {"streams": ("A-Z",), "symbol_count": 200, "seed": 7, "epoch_ns": EPOCH + 123_456_789, "step_ns": 6_666},
    {"streams": ("A-M", "N-Z"), "symbol_count": 60, "seed": 3, "epoch_ns": 0, "step_ns": 1_000_000},
    {"streams": ("A-M", "N-Z"), "symbol_count": 1, "seed": 3, "epoch_ns": 5, "step_ns": 2_000_000_000},
    {"streams": ("B-C", "X"), "symbol_count": 5000, "seed": 11, "epoch_ns": EPOCH - 1_000, "step_ns": 7},
    {"streams": ("A-Z",), "symbol_count": 3, "seed": 1, "epoch_ns": 0, "step_ns": 999_999_999},
    {"streams": ("A-Z",), "symbol_count": 20, "seed": 2, "epoch_ns": EPOCH, "step_ns": 0},
]


@pytest.mark.parametrize("config", MODEL_CONFIGS)
def test_generate_matches_the_reference_model_byte_for_byte(config: dict[str, object]) -> None:
    reference = ReferenceModel(**config, start_seq=1000)  # type: ignore[arg-type]
    fast = SymbolModel(**config, start_seq=1000)  # type: ignore[arg-type]
    chunks = random.Random(0)
    count = 6000
    expected = [next(reference) for _ in range(count)]
    got: list[list[bytes]] = [[] for _ in fast.next_seq]
    left = count
    while left:  # chunks of every size, as the send loop's ticks are
        size = min(left, chunks.choice([1, 2, 7, 64, 150, 999]))
        for stream, messages in enumerate(fast.generate(size)):
            got[stream] += messages
        left -= size
    for stream in range(len(got)):
        assert got[stream] == [data for s, _seq, data in expected if s == stream]
    assert fast.next_seq == reference.next_seq
    iterated = SymbolModel(**config, start_seq=1000)  # type: ignore[arg-type]
    assert [(m.stream, m.source_seq, m.data) for m in itertools.islice(iterated, 500)] == expected[:500]
    batched = iterated.generate_messages(700)  # in global order, across streams
    assert [(m.stream, m.source_seq, m.data) for m in batched] == expected[500:1200]


@given(
    seed=st.integers(0, 2**64),
    symbols=st.integers(1, 300),
    step_ns=st.integers(0, 3 * 10**9),
    epoch_ns=st.integers(0, 2 * 10**18),
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8),
)
@settings(max_examples=40, deadline=None)
def test_property_generate_matches_reference(
    seed: int, symbols: int, step_ns: int, epoch_ns: int, sizes: list[int]
) -> None:
    config = {"streams": ("A-M", "N-Z"), "symbol_count": symbols, "seed": seed, "epoch_ns": epoch_ns}
    reference = ReferenceModel(**config, step_ns=step_ns, start_seq=1)  # type: ignore[arg-type]
    fast = SymbolModel(**config, step_ns=step_ns)  # type: ignore[arg-type]
    for size in sizes:
        expected = [next(reference) for _ in range(size)]
        got = fast.generate(size)
        for stream in (0, 1):
            assert got[stream] == [data for s, _seq, data in expected if s == stream]


def test_generated_messages_are_valid_fix_with_right_checksums() -> None:
    fast = SymbolModel(streams=("A-Z",), symbol_count=500, seed=4, epoch_ns=EPOCH)
    payload = b"".join(fast.generate(5000)[0])
    bodies, malformed = split_messages(payload)
    assert (len(bodies), malformed) == (5000, 0)


def test_checksum_of_a_message_longer_than_the_adler_shortcut() -> None:
    # Messages are ~150-250 bytes; past 256 the 10= sum takes proto.fix.checksum.
    fast = SymbolModel(streams=("A-Z",), symbol_count=1, seed=1, epoch_ns=EPOCH)
    long_entries = b"268=1\x01279=0\x01269=2\x01270=1.00\x01271=" + b"9" * 300 + b"\x01"
    (message,) = fast._assemble([0], [long_entries])[0]  # the private batch formatter, on purpose
    assert len(message) > 256
    bodies, malformed = split_messages(message)
    assert (len(bodies), malformed) == (1, 0)
    assert message.endswith(b"10=%03d\x01" % checksum(message[:-7]))


class _FakeSocket:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self._parts: list[bytes] = []

    def send_multipart(self, frames: tuple[bytes, bytes]) -> None:
        self.sent.append(frames[1])

    def setsockopt(self, option: int, value: int) -> None:
        pass  # BackpressureSender's XPUB_NODROP and SNDTIMEO: this socket never makes a send wait

    def send(self, data: bytes, flags: int = 0, copy: bool = True) -> None:
        self._parts.append(data)
        if not flags & zmq.SNDMORE:
            assert len(self._parts) == 2, self._parts  # [topic, payload], as send_multipart sends
            self.sent.append(self._parts[1])
            self._parts = []


@pytest.mark.parametrize("batch", [1, 5, 64])
@pytest.mark.parametrize("streams", [("A-M", "N-Z"), ("A-Z",)])
def test_send_loop_fast_path_sends_the_frames_plan_frames_makes(batch: int, streams: tuple[str, ...]) -> None:
    # With nothing malformed to inject, the fast path (messages made ahead, _Lookahead, filled
    # between sends as the loop fills it while nothing is due) must put the same frames on each
    # stream's socket as the message-by-message path.
    config = SourceConfig(streams=streams, symbols=40, seed=5, rate=1000.0)
    frames: list[list[list[bytes]]] = []
    last_seqs: list[list[int]] = []
    for planned in (False, True):
        source = PlainSource(config)
        sockets = [_FakeSocket() for _ in streams]
        source._sockets = sockets  # type: ignore[assignment]  # no ZeroMQ in unit tests
        source._senders = [BackpressureSender(socket) for socket in sockets]  # type: ignore[arg-type]
        summary = SourceSummary(config.streams, {}, source._sent, [0] * len(streams))
        model = SymbolModel(streams=config.streams, symbol_count=40, seed=5, epoch_ns=EPOCH)
        ahead = _Lookahead(model)
        generated = 0
        for due in (1, 3, 150, 7, 64, 65, 200, 16, 17):
            if planned:
                source._send_planned(model, due, generated, batch, random.Random(1), summary)
            else:
                while ahead.low():
                    ahead.fill()
                source._send_streams(ahead.take(due, len(streams)), batch, summary)
            generated += due
        assert sum(source._sent) == generated
        if planned:
            assert summary.last_seq == [n - 1 for n in model.next_seq]
        frames.append([socket.sent for socket in sockets])
        last_seqs.append(list(summary.last_seq))
    assert frames[0] == frames[1]
    assert last_seqs[0] == last_seqs[1]  # what was sent, though the lookahead made more
    assert all(len(split_messages(frame)[0]) <= batch for stream in frames[0] for frame in stream)


@pytest.mark.parametrize("p", [0.02, 0.45, 0.5, 1e-9, 0.999999])
def test_random_below_decides_like_random_on_the_boundary_words(p: float) -> None:
    from feedha.plain_source.model import _RandomBelow  # the fast path's exact test, checked at its edges

    below = _RandomBelow.of(p)

    def random_of(a: int, b: int) -> float:  # what Random.random() computes from its two words
        return ((a >> 5) * 67108864.0 + (b >> 6)) * (1.0 / 9007199254740992.0)

    edges = {below.high_below - 1, below.high_below, below.high_tie - 1, below.high_tie, 0, 2**32 - 1}
    lows = {(below.low_below << 6) + d for d in (-65, -64, -1, 0, 1, 63, 64)} | {0, 2**32 - 1}
    rng = random.Random(p)
    pairs = [(a, b) for a in edges for b in lows if 0 <= a < 2**32 and 0 <= b < 2**32]
    pairs += [(rng.getrandbits(32), rng.getrandbits(32)) for _ in range(2000)]
    for a, b in pairs:
        fast = a < below.high_below or (a < below.high_tie and b >> 6 < below.low_below)
        assert fast == (random_of(a, b) < p), (a, b)
