"""kafkatier.storage.config: topic configuration with Kafka's names, defaults and validation.

``log_config`` is Kafka's ``LogConfig`` (each setting declared once with a ``spec``);
``topic_files`` keeps each topic's overrides in a properties file at the log-dir root, where a
cluster would keep them in its metadata log.
"""
