"""The models the recorder trains: each with its random batch, its loss and its optimizer.

No weights are downloaded: the torchvision networks are built with weights=None, and the
transformers and the NMT model are built here from their published configurations with plain
torch.nn. A Workload says how to build the model (on the host), how to make one batch (on the
host, from a seeded generator), how to compute the loss, and which optimizer trains it: SGD with
momentum for the convolutional networks, AdamW for the transformers and the LSTM.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class Workload:
    """One model to record: subclasses give build(), batch() and loss()."""

    description = ""
    default_batch = 1

    def build(self):
        """The model, on the host, in training mode."""
        raise NotImplementedError

    def batch(self, size, generator):
        """(inputs, targets): host tensors of one random batch of `size` samples."""
        raise NotImplementedError

    def loss(self, model, inputs, targets):
        return F.cross_entropy(model(inputs), targets)

    def optimizer(self, model):
        return torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, foreach=False)


# --- convolutional networks and ViT (torchvision) ----------------------------------------------

class ImageClassifier(Workload):
    """A torchvision classifier on random 224x224 RGB images and ImageNet's 1000 classes."""

    def __init__(self, constructor, description, default_batch, sgd=True, image_size=224):
        self._constructor = constructor
        self.description = description
        self.default_batch = default_batch
        self._sgd = sgd
        self._image_size = image_size

    def build(self):
        return self._constructor(weights=None, num_classes=1000).train()

    def batch(self, size, generator):
        images = torch.randn(size, 3, self._image_size, self._image_size, generator=generator)
        labels = torch.randint(0, 1000, (size,), generator=generator)
        return images, labels

    def optimizer(self, model):
        if not self._sgd:
            return super().optimizer(model)
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4,
                               foreach=False)


# --- transformers built from configs ------------------------------------------------------------

class SelfAttention(nn.Module):
    """Multi-head self-attention as GPT-2 and BERT compute it: one fused q/k/v projection,
    softmax(q k^T / sqrt(d)) v per head, an output projection; causal for a decoder."""

    def __init__(self, width, heads, max_length, causal, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.attention_dropout = nn.Dropout(dropout)
        self.output_dropout = nn.Dropout(dropout)
        self.causal = causal
        if causal:
            mask = torch.tril(torch.ones(max_length, max_length, dtype=torch.bool))
            self.register_buffer("mask", mask.view(1, 1, max_length, max_length))

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        if self.causal:
            scores = scores.masked_fill(~self.mask[:, :, :length, :length], float("-inf"))
        weights = self.attention_dropout(F.softmax(scores, dim=-1))
        y = (weights @ v).transpose(1, 2).contiguous().view(batch, length, width)
        return self.output_dropout(self.proj(y))


class TransformerLayer(nn.Module):
    """A transformer layer: GPT-2's pre-norm one, or BERT's post-norm one."""

    def __init__(self, width, heads, max_length, causal, pre_norm, dropout=0.1):
        super().__init__()
        self.pre_norm = pre_norm
        self.norm1 = nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads, max_length, causal, dropout)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width), nn.Dropout(dropout))

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.mlp(x))


class GPT(nn.Module):
    """GPT-2 small's shape: token and position embeddings, pre-norm decoder layers, a final
    LayerNorm and a language-model head tied to the token embedding."""

    def __init__(self, vocab, length, width, layers, heads):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(length, width)
        self.dropout = nn.Dropout(0.1)
        self.layers = nn.ModuleList(
            TransformerLayer(width, heads, length, causal=True, pre_norm=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.token.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.dropout(self.token(tokens) + self.position(positions))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


class BERT(nn.Module):
    """BERT-base's shape: token, position and segment embeddings with LayerNorm, post-norm
    encoder layers, and the masked-language-model head (dense, GELU, LayerNorm, a decoder tied to
    the token embedding)."""

    def __init__(self, vocab, length, width, layers, heads):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(length, width)
        self.segment = nn.Embedding(2, width)
        self.embedding_norm = nn.LayerNorm(width)
        self.dropout = nn.Dropout(0.1)
        self.layers = nn.ModuleList(
            TransformerLayer(width, heads, length, causal=False, pre_norm=False)
            for _ in range(layers))
        self.transform = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        self.decoder = nn.Linear(width, vocab)
        self.decoder.weight = self.token.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        segments = torch.zeros_like(tokens)
        x = self.token(tokens) + self.position(positions) + self.segment(segments)
        x = self.dropout(self.embedding_norm(x))
        for layer in self.layers:
            x = layer(x)
        return self.decoder(self.transform(x))


class LanguageModel(Workload):
    """A transformer language model on random tokens: next-token prediction for the decoder,
    masked-token prediction (15% of positions) for the encoder."""

    def __init__(self, model_class, description, default_batch, vocab, length, width, layers,
                 heads, masked):
        self._model_class = model_class
        self.description = description
        self.default_batch = default_batch
        self._config = (vocab, length, width, layers, heads)
        self._masked = masked

    def build(self):
        return self._model_class(*self._config).train()

    def batch(self, size, generator):
        vocab, length = self._config[0], self._config[1]
        tokens = torch.randint(0, vocab, (size, length), generator=generator)
        targets = torch.randint(0, vocab, (size, length), generator=generator)
        if self._masked:
            unmasked = torch.rand(size, length, generator=generator) >= 0.15
            targets[unmasked] = -100           # cross_entropy's ignore_index
        return tokens, targets

    def loss(self, model, inputs, targets):
        logits = model(inputs)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


# --- LSTM encoder-decoder with additive attention -----------------------------------------------

class NMT(nn.Module):
    """An attentional NMT model (Bahdanau et al. 2015): source embedding, a bidirectional LSTM
    encoder, an LSTM decoder fed the previous target token and the attention context, additive
    attention v^T tanh(W s + U h) over the encoder's states, and a projection to the target
    vocabulary. Trained with teacher forcing."""

    def __init__(self, vocab, embed, hidden, layers):
        super().__init__()
        self.source_embedding = nn.Embedding(vocab, embed)
        self.target_embedding = nn.Embedding(vocab, embed)
        self.encoder = nn.LSTM(embed, hidden, num_layers=layers, bidirectional=True,
                               batch_first=True)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.decoder = nn.LSTMCell(embed + 2 * hidden, hidden)
        self.attention_query = nn.Linear(hidden, hidden, bias=False)      # W
        self.attention_keys = nn.Linear(2 * hidden, hidden, bias=False)   # U
        self.attention_score = nn.Linear(hidden, 1, bias=False)          # v
        self.output = nn.Linear(hidden + 2 * hidden, vocab)
        self.dropout = nn.Dropout(0.2)

    def forward(self, source, target_in):
        encoded, _ = self.encoder(self.dropout(self.source_embedding(source)))  # B x S x 2H
        keys = self.attention_keys(encoded)
        state = torch.tanh(self.bridge(encoded.mean(dim=1)))
        cell = torch.zeros_like(state)
        context = encoded.new_zeros(encoded.shape[0], encoded.shape[2])
        embedded = self.dropout(self.target_embedding(target_in))
        outputs = []
        for t in range(target_in.shape[1]):
            state, cell = self.decoder(torch.cat([embedded[:, t], context], dim=1),
                                       (state, cell))
            scores = self.attention_score(
                torch.tanh(keys + self.attention_query(state).unsqueeze(1))).squeeze(2)
            weights = F.softmax(scores, dim=1)
            context = torch.bmm(weights.unsqueeze(1), encoded).squeeze(1)
            outputs.append(torch.cat([state, context], dim=1))
        return self.output(self.dropout(torch.stack(outputs, dim=1)))  # B x T x vocab


class Translation(Workload):
    """The NMT model on random source and target sentences of fixed lengths."""

    description = ("LSTM encoder-decoder with additive attention: vocab 32000, embedding 512, "
                   "2-layer bi-LSTM encoder and LSTM decoder of 512, source and target 32 tokens")
    default_batch = 32

    def __init__(self, vocab=32000, embed=512, hidden=512, layers=2, length=32):
        self._config = (vocab, embed, hidden, layers)
        self._length = length

    def build(self):
        return NMT(*self._config).train()

    def batch(self, size, generator):
        vocab = self._config[0]
        source = torch.randint(0, vocab, (size, self._length), generator=generator)
        target = torch.randint(0, vocab, (size, self._length + 1), generator=generator)
        return (source, target[:, :-1]), target[:, 1:]

    def loss(self, model, inputs, targets):
        logits = model(*inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# --- a small CNN for tests ----------------------------------------------------------------------

class TinyCNN(nn.Module):
    """Two conv-BN-ReLU blocks, a pooling and a linear classifier: seconds to record."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(32, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Tiny(ImageClassifier):
    def __init__(self):
        super().__init__(None, "a small CNN (two conv-BN-ReLU blocks) on 32x32 images, for tests",
                         default_batch=8, image_size=32)

    def build(self):
        return TinyCNN().train()

    def batch(self, size, generator):
        images = torch.randn(size, 3, 32, 32, generator=generator)
        return images, torch.randint(0, 10, (size,), generator=generator)


MODELS = {
    "resnet50": ImageClassifier(torchvision.models.resnet50,
                                "torchvision ResNet-50 on 224x224 images", 16),
    "resnet152": ImageClassifier(torchvision.models.resnet152,
                                 "torchvision ResNet-152 on 224x224 images", 8),
    "vgg16": ImageClassifier(torchvision.models.vgg16, "torchvision VGG-16 on 224x224 images", 8),
    "efficientnet_b0": ImageClassifier(torchvision.models.efficientnet_b0,
                                       "torchvision EfficientNet-B0 on 224x224 images", 16),
    "vit_b_16": ImageClassifier(torchvision.models.vit_b_16,
                                "torchvision ViT-B/16 on 224x224 images", 8, sgd=False),
    "gpt2": LanguageModel(GPT, "GPT-2-small-style decoder: 12 layers, width 768, 12 heads, "
                          "vocab 50257, 256 tokens, tied head", 4,
                          vocab=50257, length=256, width=768, layers=12, heads=12,
                          masked=False),
    "bert": LanguageModel(BERT, "BERT-base-style encoder: 12 layers, width 768, 12 heads, "
                          "vocab 30522, 128 tokens, masked-LM head", 8,
                          vocab=30522, length=128, width=768, layers=12, heads=12, masked=True),
    "nmt": Translation(),
    "tiny_cnn": Tiny(),
}
