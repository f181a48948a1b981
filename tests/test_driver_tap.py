"""The worker's end of the driver tap (browser/tap.py) reads NUL-ended
messages whatever the reads cut them into; tests/test_cdp.py drives real
clients through it, and checks who may connect."""

from __future__ import annotations

from browser.tap import Link


def test_a_link_hears_each_message_whole_however_the_reads_cut_them():
    link, heard = Link(), []
    link.on_message = heard.append
    link.data_received(b'{"id":1}\0{"id":2}\0{"id"')
    link.data_received(b':3,"x":"')
    link.data_received(("é" * 5).encode()[:3])
    link.data_received(("é" * 5).encode()[3:] + b'"}\0')
    link.data_received(b'{"id":4}\0')
    assert heard == ['{"id":1}', '{"id":2}', '{"id":3,"x":"ééééé"}', '{"id":4}']
