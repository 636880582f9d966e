"""Draw docs/otlp-trace.svg: one request's trace as a trace backend receives it.

Runs ``stepview --headless --model demo-tiny --max-num-seqs 1 --otlp-traces-endpoint URL``
into a real OTLP/gRPC receiver (stepview.testing.otlp_receiver), takes the request that
waited longest, and draws its trace as a waterfall: stepview's request span, vLLM's own
``llm_request`` inside it, and stepview's phase spans, each bar at its real start and length.
Needs vLLM (a real run): ``python scripts/trace_picture.py [OUT.svg]``.
"""

from __future__ import annotations

import html
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from stepview.testing.otlp_receiver import OtlpReceiver, ReceivedSpan

ROOT = Path(__file__).resolve().parent.parent
COLOURS = {"waiting": "#9e9e9e", "prefill": "#e6b800", "decode": "#4caf50", "preempted": "#e53935"}
ROW, LEFT, WIDTH = 30, 330, 560


def _run(receiver: OtlpReceiver) -> list[ReceivedSpan]:
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable, "-m", "stepview", "--headless", "--model", "demo-tiny",
            "--max-num-seqs", "1", "--log-file", str(Path(folder) / "log"),
            "--otlp-traces-endpoint", receiver.endpoint,
        ]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        subprocess.run(command, env=env, check=True, capture_output=True, cwd=ROOT)
    return receiver.wait_for(lambda got: sum(s.name == "llm_request" for s in got) >= 3)


def _label(span: ReceivedSpan) -> str:
    a = span.attributes
    if span.name == "llm_request":
        return f"llm_request (vLLM) queue {a['gen_ai.latency.time_in_queue'] * 1000:.1f} ms"
    if "stepview.wait.text" in a:
        return f"{span.name}: {a['stepview.wait.text']}"
    for key in ("stepview.prefill.tokens", "stepview.decode.tokens"):
        if key in a:
            return f"{span.name} ({a[key]} tokens, {a['stepview.steps']} steps)"
    return span.name


def draw(spans: list[ReceivedSpan]) -> str:
    roots = [s for s in spans if "stepview.request.outcome" in s.attributes]
    root = max(roots, key=lambda r: r.attributes.get("gen_ai.latency.time_in_queue", 0))
    inside = [s for s in spans if s.parent_id == root.span_id]
    rows = [root, *sorted(inside, key=lambda s: (s.name != "llm_request", s.start_ns))]
    t0, t1 = root.start_ns, max(s.end_ns for s in rows)
    scale = WIDTH / max(1, t1 - t0)
    height = ROW * (len(rows) + 2)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" '
        f'height="{height}" font-family="monospace" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="18">trace {root.trace_id} ({(t1 - t0) / 1e6:.1f} ms)</text>',
    ]
    for index, span in enumerate(rows):
        y = ROW * (index + 1)
        depth = 0 if span is root else 1
        phase = span.attributes.get("stepview.phase", "")
        colour = COLOURS.get(str(phase), "#1e88e5" if span is root else "#8e24aa")
        x = LEFT + (span.start_ns - t0) * scale
        w = max(2.0, (span.end_ns - span.start_ns) * scale)
        label = html.escape(_label(span) if span is not root else span.name)
        out.append(f'<text x="{10 + 14 * depth}" y="{y + 16}">{label[:44]}</text>')
        out.append(f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="16" fill="{colour}"/>')
        ms = (span.end_ns - span.start_ns) / 1e6
        out.append(
            f'<text x="{min(x + w + 4, LEFT + WIDTH - 40):.1f}" y="{y + 16}">{ms:.1f} ms</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "otlp-trace.svg"
    receiver = OtlpReceiver()
    try:
        spans = _run(receiver)
    finally:
        receiver.stop()
    target.write_text(draw(spans), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
