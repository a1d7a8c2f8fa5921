"""The status details of a failed P4Runtime Write, as the software switch's server writes them and
the controller reads them.

A failed Write batch is a gRPC UNKNOWN status whose binary details (trailer
:data:`STATUS_DETAILS_KEY`) hold a ``google.rpc.Status`` with one ``p4.v1.Error`` per failed update.
p4gen's server lists only the failed updates, each with ``space`` :data:`INDEX_SPACE` and ``code`` the
update's index in the batch; other servers (BMv2's PI) list one Error per update, in order.
"""

STATUS_DETAILS_KEY = "grpc-status-details-bin"
INDEX_SPACE = "p4gen.update_index"     # p4.v1.Error.space whose ``code`` is the failed update's index
