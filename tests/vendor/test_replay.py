"""A failing L1 check names the command that replays it, and that command reproduces the failure alone."""

from __future__ import annotations

import textwrap

import numpy as np

from specsim import cli
from specsim.conformance.run import runner
from specsim.conformance.run.document import document

WRONG_BONUS = """
    import numpy as np
    from devices.torch_device import TorchDevice

    class WrongBonus:
        '''The torch device, but the bonus token (every draft accepted) is one id off.'''
        def __init__(self):
            self.inner = TorchDevice()
            self.name, self.capabilities = "wrong-bonus", self.inner.capabilities

        def verify(self, batch, noise=None):
            out = self.inner.verify(batch, noise)
            ids = np.array(out.output_token_ids)
            for i in range(batch.batch_size):
                k = int(batch.num_draft_tokens[i])
                if k and int(out.num_accepted[i]) == k:
                    ids[i, k] = (ids[i, k] + 1) % batch.vocab_size
            return type(out)(ids, out.num_accepted)

    def make():
        return WrongBonus()
"""


def test_a_failing_check_replays_alone_and_names_the_bonus_token(tmp_path, monkeypatch, capsys):
    (tmp_path / "wrong_bonus_dev.py").write_text(textwrap.dedent(WRONG_BONUS))
    monkeypatch.syspath_prepend(str(tmp_path))
    from wrong_bonus_dev import make
    ctx = runner.Context(quick=True)
    results = runner.run_group("L1-injected", make(), ctx)
    doc = document("wrong_bonus_dev:make", make(), ctx, results, ["L1-injected"])
    failing = [c for c in doc["checks"] if c["status"] == "fail"]
    assert failing and "the bonus token after all" in failing[0]["detail"]
    command = failing[0]["extra"]["replay"]
    assert command == f"specsim replay --device wrong_bonus_dev:make --seed 0 --quick {failing[0]['name']}"
    npz = tmp_path / "case.npz"
    assert cli.main(command.split()[1:] + ["--npz", str(npz)]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith(f"fail  {failing[0]['name']}") and "request(s) differ from the reference" in printed
    arrays = np.load(npz)
    got, want = arrays["call0_got_output_token_ids"], arrays["call0_expected_output_token_ids"]
    assert got.shape == want.shape and (got != want).any() and "call0_target_logits" in arrays


def test_replay_refuses_a_check_it_cannot_run_alone(capsys):
    assert cli.main(["replay", "L3/full-mixed/x"]) == 2
    assert "replayable checks start with" in capsys.readouterr().err
