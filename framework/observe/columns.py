"""OpenLineage's columnLineage facet of a model, from lake's own column lineage (sqlglot)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from framework.errors import LakeError
from framework.transform.lineage import LineageNode, Tracer


def _subtype(node: LineageNode, source: LineageNode) -> str:
    """IDENTITY when the column is the source column itself, AGGREGATION under an aggregate,
    TRANSFORMATION otherwise (OpenLineage's DIRECT subtypes)."""
    if node.expression is None:
        return "TRANSFORMATION"
    try:
        tree = sqlglot.parse_one(node.expression, read="spark")
    except SqlglotError:
        return "TRANSFORMATION"
    if tree.find(exp.AggFunc):
        return "AGGREGATION"
    if isinstance(tree, exp.Column) and tree.name.lower() == source.column:
        return "IDENTITY"
    return "TRANSFORMATION"


def column_lineage(tracer: Tracer, model: str, dataset_of: Callable[[str], tuple[str, str]]) -> Any:
    """The facet, or None when lake cannot name the model's columns (a Python model, a `*` of
    an upstream not ingested yet)."""
    from openlineage.client.facet_v2 import column_lineage_dataset as cl

    columns = tracer.columns(model)
    if not columns:
        return None
    fields: dict[str, Any] = {}
    for col in columns:
        try:
            node = tracer.trace(f"{model}.{col}")
        except LakeError:
            continue
        inputs = []
        for src in node.sources:
            ns, name = dataset_of(src.table)
            inputs.append(cl.InputField(namespace=ns, name=name, field=src.column,
                                        transformations=[cl.Transformation(type="DIRECT", subtype=_subtype(node, src))]))
        for key in node.grouped_by:
            ns, name = dataset_of(key.table)
            inputs.append(cl.InputField(namespace=ns, name=name, field=key.column,
                                        transformations=[cl.Transformation(type="INDIRECT", subtype="GROUP_BY")]))
        fields[col] = cl.Fields(inputFields=inputs, transformationDescription=node.expression)
    return cl.ColumnLineageDatasetFacet(fields=fields) if fields else None
