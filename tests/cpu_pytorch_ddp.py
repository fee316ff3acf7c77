"""``python -m tests.cpu_pytorch_ddp ARGS``: ``fairseq-train``
(``fairseq_cli.train``) whose ``--ddp-backend pytorch_ddp`` runs on CPU.
fairseq hands PyTorch's ``DistributedDataParallel`` ``device_ids=[device_id]``
whatever the device, which PyTorch refuses for a module on CPU; for one it
passes none, as PyTorch asks. Nothing else changes: the model is wrapped,
its gradients reduced in buckets by autograd hooks during the backward
pass, as on GPUs."""
from torch.nn.parallel import DistributedDataParallel

from fairseq_cli import train

_init = DistributedDataParallel.__init__


def _init_on_cpu(self, module, device_ids=None, output_device=None, *args, **kwargs):
    if next(module.parameters()).device.type == "cpu":
        device_ids = output_device = None
    _init(self, module, device_ids, output_device, *args, **kwargs)


if __name__ == "__main__":
    DistributedDataParallel.__init__ = _init_on_cpu
    train.cli_main()
