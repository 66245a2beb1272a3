"""The SVG the docs site and the run report draw: layout, colours, escaping, empty data."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import networkx as nx

from framework.site.svg import STATUS_COLOURS, bar_chart, dag_svg, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def _graph() -> nx.DiGraph:
    g: nx.DiGraph = nx.DiGraph()
    g.add_edges_from([("ods.a", "dwd.x"), ("ods.b", "dwd.x"), ("dwd.x", "dws.y"), ("ods.a", "dws.y"), ("ods.c", "dws.z")])
    return g


def _boxes(svg: str) -> dict[str, tuple[float, float, str]]:
    """node name -> (x, y, fill), read back from the SVG."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        rect = g.find(f"{SVG}rect")
        assert title is not None and rect is not None and title.text
        out[title.text.split(":")[0]] = (float(rect.get("x", 0)), float(rect.get("y", 0)), rect.get("fill", ""))
    return out


def test_dag_puts_every_table_right_of_all_it_reads_and_colours_by_status() -> None:
    g = _graph()
    svg = dag_svg(g, {"ods.a": "ods", "ods.b": "ods", "ods.c": "ods", "dwd.x": "built", "dws.y": "failed"})
    boxes = _boxes(svg)
    assert set(boxes) == set(g.nodes)
    for a, b in g.edges:
        assert boxes[a][0] < boxes[b][0], (a, b)
    assert boxes["dws.y"][2] == STATUS_COLOURS["failed"] and boxes["dwd.x"][2] == STATUS_COLOURS["built"]
    assert boxes["dws.z"][2] == STATUS_COLOURS["not built yet"]  # no status given
    positions = [(x, y) for x, y, _ in boxes.values()]
    assert len(set(positions)) == len(positions)  # no two boxes on top of each other
    assert len(re.findall(r"marker-end=", svg)) == g.number_of_edges()


def test_dag_links_nodes_and_escapes_names() -> None:
    g: nx.DiGraph = nx.DiGraph()
    g.add_edge("ods.<b>", "dws.a&b")
    svg = dag_svg(g, {}, {"dws.a&b": "#t-dws.a&b"})
    ET.fromstring(svg)  # well-formed XML: every name escaped
    assert "<b>" not in svg and 'href="#t-dws.a&amp;b"' in svg


def test_line_chart_draws_a_series_per_model_with_gaps() -> None:
    svg = line_chart("Build time", "seconds", ["r1", "r2", "r3"], {"dws.a": [1.0, None, 3.0], "dws.b": [2.0, 2.5, 12.0]})
    root = ET.fromstring(svg)
    paths = {p.get("data-series"): p.get("d", "") for p in root.iter(f"{SVG}path")}
    assert set(paths) == {"dws.a", "dws.b"}
    assert paths["dws.a"].count("M") == 2 and "L" not in paths["dws.a"]  # the gap splits the line
    assert paths["dws.b"].count("M") == 1 and paths["dws.b"].count("L") == 2
    assert len(list(root.iter(f"{SVG}circle"))) == 5
    assert ">20<" in svg  # the axis goes to a round number above the largest value (12 -> 20)


def test_bar_chart_and_empty_data() -> None:
    svg = bar_chart("Events", "events", [("b0", 10.0), ("b1", 40.0)])
    heights = [float(r.get("height", 0)) for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert len(heights) == 2 and abs(heights[1] / heights[0] - 4.0) < 1e-6
    assert "no data yet" in bar_chart("Events", "events", []) and "no data yet" in line_chart("x", "s", [], {})
