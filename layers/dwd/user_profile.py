"""A Python model: users with a normalised e-mail domain and device brand."""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def model(ctx) -> DataFrame:  # type: ignore[no-untyped-def]
    users = ctx.read("ods.user")
    return users.select(
        "id",
        "name",
        F.lower(F.substring_index("email", "@", -1)).alias("email_domain"),
        F.split("device_model", " ").getItem(0).alias("brand"),
        "create_time",
    )
