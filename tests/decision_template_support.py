"""A decision template in the GGUF (llama.decision.template) that the GGUF-scheme tests write into variants of the
bundled model (tests/adapter/test_gguf_schemes.py) and the caller-text tests serve (test_caller_text.py)."""

# ChatML, as SmolLM2 was tuned. Newlines sit inside expressions, so the render does not depend on
# trim_blocks/lstrip_blocks and the test can render it with a plain Jinja environment. The template
# never shows the question id (jevcompat's semantics.question-id); lev gets its codes as `label`.
TEMPLATE = (
    "<|im_start|>system\nYou answer decision questions with the label of one option.<|im_end|>\n"
    "<|im_start|>user\nState:\n"
    "{% if state is string %}{{ state }}{% else %}{{ state | tojson }}{% endif %}"
    "{{ '\\n\\nQuestion (' ~ type ~ '): ' }}"
    "{% if instructions is none %}Which option fits the state?"
    "{% elif instructions is string %}{{ instructions }}{% else %}{{ instructions | tojson }}{% endif %}"
    "{{ '\\nOptions:\\n' }}"
    "{% for o in options %}"
    "{% if label is defined %}{{ label[loop.index0] }}"
    '{% else %}{{ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[loop.index0] }}{% endif %}'
    "{{ '. ' ~ o.key }}{% if o.description is not none %}: "
    "{% if o.description is string %}{{ o.description }}{% else %}{{ o.description | tojson }}{% endif %}"
    "{% endif %}{{ '\\n' }}"
    "{% endfor %}"
    "{{ 'Answer with the label of one option.<|im_end|>\\n<|im_start|>assistant\\n' }}"
)
