"""The supervised trainer every stage uses: TRL's ``SFTTrainer``, with a plain loss on the CPU.

TRL computes the SFT loss through a fused, chunked language-model head (``fused_lm_head``): the
logits are never held whole, which is what a GPU with a 150k-token vocabulary needs, and it also
computes each token's entropy for the logs. On the CPU run the chunks are Python-driven tiles and
the entropy a second softmax: a third of a fine-tuning step of the ``small`` preset went there
(decision 0028). :class:`ArenaSFTTrainer` keeps TRL's data handling (chat template, loss on the
assistant turns, collation) and, where ``lean_loss`` holds, computes the same loss from the
model's logits (the sum of the answer tokens' negative log-likelihoods over their count, as TRL's
fused head does) and the same next-token accuracy; the entropy metric is left out.
"""

from __future__ import annotations

from typing import Any

from trl import SFTTrainer

from .common import use_cpu


def lean_loss() -> bool:
    """Whether the plain loss is used: on the CPU run (see the module)."""
    return use_cpu()


def right_padded(mask: Any) -> bool:
    """Whether every row of the attention ``mask`` is ones, then zeros (TRL's collator pads on the
    right). Then the mask adds nothing to causal attention for any real token: each attends only to
    the tokens before it, all real, at the same positions. The pads after it attend to more, but
    their labels are -100, so they carry no loss and no gradient."""
    return bool(mask.shape[-1] == 0 or ((mask[:, :1] == 1).all() and (mask[:, 1:] <= mask[:, :-1]).all()))


class ArenaSFTTrainer(SFTTrainer):
    """``SFTTrainer`` with the plain loss where :func:`lean_loss` holds (the fused head otherwise).

    Contract: the same loss value as TRL's (up to float rounding; tested), ``mean_token_accuracy``
    and ``num_tokens`` logged as TRL logs them; no ``entropy`` metric on the plain path. A
    right-padded batch goes to the model without its attention mask (:func:`right_padded`): the
    same loss and gradients (tested), by the causal attention kernel, not the masked one."""

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        if not lean_loss() or return_outputs or self.aux_loss_enabled or self.label_smoother is not None \
                or self.compute_loss_func is not None or getattr(self.args, "loss_type", "nll") != "nll":
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        import torch

        labels = inputs["labels"]
        feed = {k: v for k, v in inputs.items() if k != "labels"}
        if "attention_mask" in feed and right_padded(feed["attention_mask"]):
            # the causal kernel alone: twice as fast as the masked one on these CPUs (decision 0048)
            del feed["attention_mask"]
        outputs = model(**feed, use_cache=False)
        logits = outputs.logits[:, :-1, :].float()
        target = labels[:, 1:]
        loss_sum = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                     ignore_index=-100, reduction="sum")
        valid = target != -100
        count = valid.sum() if num_items_in_batch is None else num_items_in_batch
        loss = loss_sum / torch.as_tensor(count).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes
        mode = "train" if model.training else "eval"
        with torch.no_grad():
            n_valid = int(valid.sum())
            correct = int((logits.argmax(-1).eq(target) & valid).sum())
        self._metrics[mode]["mean_token_accuracy"].append(correct / n_valid if n_valid else 0.0)
        if mode == "train" and "attention_mask" in inputs:
            self._total_train_tokens += int(inputs["attention_mask"].sum())
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
        return loss


__all__ = ["ArenaSFTTrainer", "lean_loss", "right_padded"]
