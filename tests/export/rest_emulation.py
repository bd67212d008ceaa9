"""TF Serving's REST predict API, translated the way its JSON layer does it.

`POST /v1/models/NAME:predict` takes either the row format `{"instances": [...]}`
or the columnar format `{"inputs": ...}`, plus an optional `"signature_name"`
(default `serving_default`). TF Serving (tensorflow_serving/util/json_tensor.cc)
maps them onto the signature's named inputs:

- row format: a signature with one input takes each instance as that input's
  value for one example (an object naming the input also works); with several
  inputs, every instance is an object with all of them. Instances are stacked
  into the batch.
- columnar: `"inputs"` is an object of named inputs (each already batched); a
  signature with one input may take the bare value.

Responses: the row format answers `{"predictions": [...]}`, one entry per
example, bare values when the signature has a single output and objects of
named outputs otherwise; the columnar format answers `{"outputs": value}` for
a single output and `{"outputs": {name: value}}` otherwise.
"""


def request_to_signature_inputs(body, signature_inputs):
    """Returns `(signature_name, {input_key: batched value})` for a request body."""
    name = body.get("signature_name", "serving_default")
    keys = sorted(signature_inputs)
    if ("instances" in body) == ("inputs" in body):
        raise ValueError("a request has exactly one of 'instances' or 'inputs'")
    if "instances" in body:
        instances = body["instances"]
        if len(keys) == 1 and not all(isinstance(i, dict) for i in instances):
            return name, {keys[0]: list(instances)}
        for instance in instances:
            if sorted(instance) != keys:
                raise ValueError(f"instance keys {sorted(instance)} != signature inputs {keys}")
        return name, {k: [instance[k] for instance in instances] for k in keys}
    inputs = body["inputs"]
    if not isinstance(inputs, dict):
        if len(keys) != 1:
            raise ValueError(f"a bare 'inputs' value needs a one-input signature, not {keys}")
        return name, {keys[0]: inputs}
    if sorted(inputs) != keys:
        raise ValueError(f"'inputs' keys {sorted(inputs)} != signature inputs {keys}")
    return name, dict(inputs)


def signature_outputs_to_response(body, outputs):
    """The JSON response for `body` given the signature's `{output_key: batched value}`."""
    keys = sorted(outputs)
    if "instances" in body:
        if len(keys) == 1:
            return {"predictions": list(outputs[keys[0]])}
        rows = len(outputs[keys[0]])
        return {"predictions": [{k: outputs[k][i] for k in keys} for i in range(rows)]}
    if len(keys) == 1:
        return {"outputs": outputs[keys[0]]}
    return {"outputs": dict(outputs)}
