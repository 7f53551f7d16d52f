"""Fixtures of the tiering tests. The real S3 server (``s3_server``, ``s3_env``, ``s3_url``,
``s3_store``) lives in tests/conftest.py, shared with the Spark reader's remote tests."""
