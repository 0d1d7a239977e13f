"""Spark integration (installed as ``arrowkafka.spark``); needs the ``spark`` extra."""
