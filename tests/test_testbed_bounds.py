"""The testbed's link-rate bounds (p4gen.testbed.bounds): wire bytes per element over the link rate."""

from __future__ import annotations

import pytest

from p4gen.plan import Plan
from p4gen.testbed import bounds
from p4gen.wire import FrameLayout


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    out = tmp_path_factory.mktemp("plan") / "sml"
    return build(make_spec(protocol="switchml", max_workers=32, slots=512), load_target("bmv2"), out).plan


def test_link_rate_bounds_count_payload_and_headers_per_element(plan):
    layout = FrameLayout(plan)
    k, frame = layout.elements, layout.frame_len
    values = k * layout.value_width // 8
    size = 1 << 20
    b = bounds.aggregation(layout, size, 5.0)
    assert b.seconds == pytest.approx(-(-size // k) * frame * 8 / 5e6)
    assert b.bytes_per_element == pytest.approx(frame / k) and frame > values
    assert f"{-(-size // k)} frames" in b.how and f"= {values} B of values + {frame - values} B of headers" in b.how
    # OmniReduce: only the blocks some worker holds
    assert bounds.aggregation(layout, size, 5.0, "omnireduce", 100).seconds == pytest.approx(100 * frame * 8 / 5e6)
    g = bounds.gloo_ring(8, size, 5.0)
    segments = -(-int(1.75 * size * 4) // 1448)
    assert g.seconds == pytest.approx(segments * 1514 * 8 / 5e6)
    assert "2(n-1)/n = 1.750" in g.how and f"{segments} TCP segments of 1448 B in 1514 B frames" in g.how
    # on jumbo-frame links (the soft target's): segments of 8948 B in 9014 B frames
    j = bounds.gloo_ring(8, size, 5.0, mtu=9000)
    assert j.seconds == pytest.approx(-(-int(1.75 * size * 4) // 8948) * 9014 * 8 / 5e6)
    assert "TCP segments of 8948 B in 9014 B frames" in j.how
    # the ratio of the two bounds is within a percent of 2(n-1)/n: both carry about 5% of headers
    assert g.seconds / b.seconds == pytest.approx(1.75, rel=0.01)
