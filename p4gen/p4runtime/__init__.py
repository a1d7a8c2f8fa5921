"""What the P4Runtime server of the software switch and the controller share.

* :mod:`.codec` -- integers and addresses to P4Runtime bytestrings and back;
* :mod:`.status` -- how a failed Write names its failed updates in the status details;
* :mod:`.compare` -- two P4Infos compared by ID and shape.

Both :mod:`p4gen.switch` (the server) and :mod:`p4gen.controller` (the client) import this
package; it imports neither.
"""
