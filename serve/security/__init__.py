"""Security of ``kafkatier serve``'s listeners, as a Kafka broker configures it: the security
protocol of each listener (``listener.security.protocol.map``), TLS from PEM files or inline PEM
(``ssl.*``), and the server side of SASL/PLAIN and SASL/SCRAM-SHA-256/512 (``sasl.*``, JAAS
``user_<name>`` options, a SCRAM users file), each key also per listener
(``listener.name.<name>.<key>``).

Bottom up: ``props`` (one listener's view of the file, the hidden :class:`Password`), ``jaas``
(Kafka's ``sasl.jaas.config`` syntax), ``tls`` (the ``ssl.SSLContext`` of a listener),
``plain`` and ``scram`` (the mechanisms' server side, SCRAM credentials and the users file),
``sasl`` (a listener's mechanisms and users) and ``listener`` (all of it per listener). The
connection-level exchange (SaslHandshake, SaslAuthenticate) is ``kafkatier.serve.authentication``.
Nothing here ever puts a password, a key or a SCRAM credential into a message or a log line.
"""
