"""feedha spark_feed package."""
