"""Small DataFrame helpers shared by the staging and the reconciliation jobs."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any


def collect_many(frames: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Collect several small aggregates in one Spark job (each row travels as JSON)."""
    from pyspark.sql import functions as F

    union = None
    for name, df in frames.items():
        part = df.select(
            F.lit(name).alias("_k"),
            F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"}).alias(
                "_v"
            ),
        )
        union = part if union is None else union.unionByName(part)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    if union is None:
        return out
    for row in union.collect():
        out[row["_k"]].append(json.loads(row["_v"]))
    return out


def values(spark: Any, rows: list[tuple[Any, ...]], ddl: str) -> Any:
    """A small DataFrame of literal rows, built without Python workers (unlike createDataFrame) and
    in one JSON literal: a column literal per value cost a py4j round trip each, seconds for a
    fleet's hundreds of subscriptions and agents."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.DataType.fromDDL(ddl)
    assert isinstance(schema, T.StructType)
    if not rows:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
    data = [dict(zip(schema.names, row, strict=True)) for row in rows]
    return spark.range(1).select(F.inline(json_literal(data, T.ArrayType(schema))))


def json_literal(data: Any, dtype: Any) -> Any:
    """Column: ``data`` (JSON-ready) as a constant of Spark type ``dtype`` (a DataType or DDL), one
    literal (constant-folded by the optimizer), not one per element."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, str):
        dtype = T.DataType.fromDDL(dtype)
    return F.from_json(F.lit(json.dumps(data)), dtype)


def top(df: Any, keys: list[str], order: list[str], cols: list[str], n: int) -> Any:
    """The first ``n`` rows (by ``order``) of every group of ``keys``, with their rank ``_rn``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(*keys).orderBy(*order)
    return (
        df.select(*dict.fromkeys(keys + order + cols))
        .withColumn("_rn", F.row_number().over(w))
        .where(F.col("_rn") <= n)
        .select(*keys, *[c for c in cols if c not in keys], "_rn")
    )


def grouped(rows: list[dict[str, Any]], keys: list[str], value: str) -> dict[tuple[Any, ...], list[Any]]:
    """``value`` of collected ``top`` rows, per ``keys``, in rank order."""
    out: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["_rn"]):
        out[tuple(r[k] for k in keys)].append(r[value])
    return out
