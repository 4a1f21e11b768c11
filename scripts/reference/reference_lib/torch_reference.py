"""The reference: Hugging Face ELECTRA generator + discriminator trained in PyTorch.

Needs the optional `hf` extra (torch, transformers); reference_check.py
imports this module only after checking that they are installed.
"""

from __future__ import annotations

import math
from typing import Dict

import numpy as np
import torch
import transformers
from torch import nn

from .rules import CheckError, lr_factor, mask_batch


class TorchReference:
    """Generator + discriminator from Hugging Face modules, trained as ELECTRA."""

    def __init__(self, config, special, train_steps: int, attn_implementation: str = "eager",
                 keras_epsilon: bool = False):
        transformers.logging.set_verbosity_error()
        self.torch = torch
        self.cfg = cfg = config
        self.keras_epsilon = keras_epsilon
        self.updates = 0
        self.special = special
        act = {"gelu": "gelu", "gelu_approximate": "gelu_new"}[cfg.hidden_act]
        common = dict(
            vocab_size=cfg.vocab_size, embedding_size=cfg.embedding_size, hidden_act=act,
            hidden_dropout_prob=cfg.hidden_dropout_prob,
            attention_probs_dropout_prob=cfg.attention_probs_dropout_prob,
            max_position_embeddings=cfg.max_position_embeddings,
            type_vocab_size=cfg.type_vocab_size, initializer_range=cfg.initializer_range,
            layer_norm_eps=cfg.layer_norm_eps, pad_token_id=special.pad)
        disc_cfg = transformers.ElectraConfig(
            hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size, **common)
        gen_cfg = transformers.ElectraConfig(
            hidden_size=cfg.generator_hidden_dim, num_hidden_layers=cfg.generator_num_layers,
            num_attention_heads=cfg.generator_num_heads,
            intermediate_size=cfg.generator_intermediate_size, **common)
        for c in (disc_cfg, gen_cfg):
            c._attn_implementation = attn_implementation

        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.noise = torch.Generator().manual_seed(cfg.seed + 1)
        self.discriminator = transformers.ElectraForPreTraining(disc_cfg)
        self.generator = transformers.ElectraForMaskedLM(gen_cfg)
        if not cfg.untied_generator_embeddings:
            # ELECTRA shares token, position and segment tables and their LayerNorm;
            # the generator's softmax weights stay tied to the (now shared) token table.
            shared = self.discriminator.electra.embeddings
            self.generator.electra.embeddings = shared
            self.generator.generator_lm_head.weight = shared.word_embeddings.weight
        table = self.generator.electra.embeddings.word_embeddings.weight
        if self.generator.generator_lm_head.weight is not table:
            raise CheckError("the reference generator's output layer is not tied to its token "
                             "embeddings (a transformers change?); cannot build the reference")
        self.model = nn.ModuleDict({"generator": self.generator,
                                    "discriminator": self.discriminator})
        self.model.train()

        decay, no_decay = [], []
        for name, param in self.model.named_parameters():  # shared tensors listed once
            (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(param)
        self.num_params = sum(p.numel() for p in decay + no_decay)
        self.num_decayed = sum(p.numel() for p in decay)
        self.params = decay + no_decay
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay_rate},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.learning_rate, betas=(cfg.adam_beta_1, cfg.adam_beta_2), eps=cfg.adam_epsilon)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, train_steps, cfg.num_warmup_steps,
                                                   cfg.lr_decay_power))

    def step(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        torch, cfg, special = self.torch, self.cfg, self.special
        F = torch.nn.functional
        ids_np = np.asarray(batch["input_ids"]).astype(np.int64)
        mask_np = np.asarray(batch["input_mask"]).astype(np.int64)
        masked = mask_batch(ids_np, mask_np, self.rng, max_predictions=cfg.predictions_per_seq,
                            mask_prob=cfg.mask_prob, mask_id=special.mask,
                            never_masked=special.never_masked, keep_prob=cfg.mask_token_keep_prob)
        ids = torch.from_numpy(ids_np)
        input_mask = torch.from_numpy(mask_np)
        segments = torch.from_numpy(np.asarray(batch["segment_ids"]).astype(np.int64))
        positions = torch.from_numpy(masked["positions"])
        originals = torch.from_numpy(masked["original_ids"])
        weights = torch.from_numpy(masked["weights"])
        rows = torch.arange(ids.shape[0])[:, None].expand_as(positions)

        lr = self.schedule.get_last_lr()[0]
        hidden = self.generator.electra(
            input_ids=torch.from_numpy(masked["masked_ids"]), attention_mask=input_mask,
            token_type_ids=segments).last_hidden_state
        gathered = hidden[rows, positions]  # [B, P, H_gen]: the head runs on chosen slots only
        mlm_logits = self.generator.generator_lm_head(
            self.generator.generator_predictions(gathered)).float()

        with torch.no_grad():
            logits = mlm_logits.detach()
            if cfg.disallow_correct:
                logits = logits - 1000.0 * cfg.temperature * F.one_hot(
                    originals, cfg.vocab_size).float()
            uniform = torch.rand(logits.shape, generator=self.noise)
            gumbel = -torch.log(-torch.log(uniform))
            sampled = torch.argmax(logits / cfg.temperature + gumbel, dim=-1)
            disc_ids = torch.from_numpy(masked["masked_ids"]).clone()
            used = weights > 0
            disc_ids[rows[used], positions[used]] = sampled[used]
            labels = ((disc_ids != ids) & (input_mask > 0)).float()

        disc_logits = self.discriminator(input_ids=disc_ids, attention_mask=input_mask,
                                         token_type_ids=segments).logits.float()
        per_slot = F.cross_entropy(mlm_logits.reshape(-1, cfg.vocab_size), originals.reshape(-1),
                                   reduction="none").reshape(originals.shape)
        mlm_loss = (per_slot * weights).sum() / (weights.sum() + 1e-6)
        real = input_mask.float()
        per_token = F.binary_cross_entropy_with_logits(disc_logits, labels, reduction="none")
        disc_loss = (per_token * real).sum() / (real.sum() + 1e-6)
        loss = cfg.gen_weight * mlm_loss + cfg.disc_weight * disc_loss

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip_norm)
        self.updates += 1
        if self.keras_epsilon:
            for group in self.optimizer.param_groups:
                group["eps"] = cfg.adam_epsilon / math.sqrt(1.0 - cfg.adam_beta_2 ** self.updates)
        self.optimizer.step()
        self.schedule.step()

        with torch.no_grad():
            hits = (mlm_logits.argmax(-1) == originals).float() * weights
            return {
                "loss": float(loss), "mlm_loss": float(mlm_loss), "disc_loss": float(disc_loss),
                "lr": float(lr), "mlm_hits": hits.numpy(), "mlm_weights": weights.numpy(),
                "labels": labels.numpy(), "probs": torch.sigmoid(disc_logits).numpy(),
                "input_mask": mask_np,
            }
