"""Resolve a Spark input (DataFrame or table/view name) and its columns; refuse NULLs.

Columns are picked from the DataFrame's schema (exact name, else a unique case-insensitive
match) and addressed as column objects, so no name the user wrote is pasted into SQL text.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import DataError, SchemaError
from ..source import ItemCol, match_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class SparkSource:
    """A resolved input: `pairs` holds its distinct (user, key) pairs as `_dp_user, _dp_k0, …`."""

    df: Any                   # the input pyspark DataFrame (only read; pyspark imported lazily)
    user: str                 # the user column's name in the input
    key_names: list[str]      # the key columns' names in the input, in order
    description: str          # for messages and reports

    @property
    def keys(self) -> list[str]:
        """Internal key column names `_dp_k0, _dp_k1, …`."""
        return [f"_dp_k{i}" for i in range(len(self.key_names))]

    def pairs(self) -> DataFrame:
        """Distinct (user, key) pairs under internal names (sql/stage_pairs.sql)."""
        from pyspark.sql import functions as F

        cols = [F.col(spark_ref(self.user)).alias("_dp_user")]
        cols += [F.col(spark_ref(n)).alias(k) for n, k in zip(self.key_names, self.keys, strict=True)]
        return self.df.select(*cols).distinct()


def spark_ref(name: str) -> str:
    """A column reference that Spark reads literally (backticks, embedded ones doubled)."""
    return "`" + name.replace("`", "``") + "`"


def resolve(spark: SparkSession, table: DataFrame | str, user_col: str, item_col: ItemCol,
            key_param: str = "item_col") -> SparkSource:
    """Resolve `table` (a Spark DataFrame or a table/view name in `spark`'s catalog)."""
    from pyspark.sql import DataFrame

    if isinstance(table, str):
        if not spark.catalog.tableExists(table):
            raise SchemaError(f"no table or view named {table!r} in this Spark session")
        df, description = spark.table(table), table
    elif isinstance(table, DataFrame):
        df, description = table, "<Spark DataFrame>"
    else:
        raise SchemaError(f"with a SparkSession, table must be a Spark DataFrame or a table name, "
                          f"got {type(table).__name__}")
    user, keys = match_columns(list(df.columns), user_col, item_col, description, key_param)
    return SparkSource(_binary_strings(df, keys), user, keys, description)


def _binary_strings(df: DataFrame, keys: list[str]) -> DataFrame:
    """`df` with its collated string key columns (Spark 4's `COLLATE UTF8_LCASE`, …) cast to the binary collation,
    as DuckDB reads them (source.canonical_key): under a collation 'A' and 'a' make one group that shows one of
    the forms its rows hold, so the released form would depend on rows other than the released key's."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    for name in keys:
        kind = df.schema[name].dataType
        if isinstance(kind, StringType) and getattr(kind, "collation", "UTF8_BINARY") != "UTF8_BINARY":
            df = df.withColumn(name, F.col(spark_ref(name)).cast(StringType("UTF8_BINARY")))
    return df


def check_nulls(source: SparkSource) -> None:
    """Refuse NULL user ids or keys, saying how many rows have them (one scan; never dropped silently)."""
    from pyspark.sql import functions as F

    conds = [F.col(spark_ref(n)).isNull() for n in source.key_names]
    any_key_null = conds[0]
    for cond in conds[1:]:
        any_key_null = any_key_null | cond
    row = source.df.agg(F.count(F.when(F.col(spark_ref(source.user)).isNull(), 1)).alias("u"),
                        F.count(F.when(any_key_null, 1)).alias("k")).collect()[0]
    problems = []
    if row["u"]:
        problems.append(f"{row['u']} row(s) with a NULL user id")
    if row["k"]:
        problems.append(f"{row['k']} row(s) with a NULL item")
    if problems:
        raise DataError(f"{source.description}: " + " and ".join(problems)
                        + "; filter or fill them first (duckdp never drops rows silently)")
