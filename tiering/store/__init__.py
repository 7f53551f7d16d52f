"""kafkatier.tiering.store: object stores behind one small contract.

``object_store`` is the contract (and its fsspec implementation); ``s3store`` implements it on
S3 through botocore, boto3's client (addressing and metadata requests in ``s3bucket``, checked
streaming part transfers in ``s3parts``); ``weed`` runs an embedded SeaweedFS server on
127.0.0.1.
"""
