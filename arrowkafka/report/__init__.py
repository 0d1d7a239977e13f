"""The capture report: numbers computed from the Parquet tables `arrowkafka decode` writes
(compute), and one self-contained HTML file that shows them (present)."""
