"""The position-wise feed-forward sublayer of a fairseq Transformer layer."""


def feed_forward_sublayer(layer, x):
    """FFN sublayer with dropout, residual and LayerNorm, exactly as the second
    half of fairseq's ``TransformerEncoderLayerBase.forward`` (and the last part
    of the decoder layer's), for layers that override ``forward`` only to change
    the attention sublayers. ``layer`` is a fairseq Transformer layer; ``x`` is
    T x B x C and so is the result.
    """
    residual = x
    if layer.normalize_before:
        x = layer.final_layer_norm(x)
    x = layer.activation_fn(layer.fc1(x))
    x = layer.activation_dropout_module(x)
    x = layer.fc2(x)
    x = layer.dropout_module(x)
    x = layer.residual_connection(x, residual)
    if not layer.normalize_before:
        x = layer.final_layer_norm(x)
    return x
