"""The middle step of measuring a trained injection classifier on model_flag_bench.py's sets (issue 48): the PyPI
package prompt-injection-detector 0.1.0 (MIT; a TF-IDF + logistic-regression model, `lr-tfidf-v1`, shipped in the
wheel as two scikit-learn pickles). Kept out of the project's dependencies: run it in its own environment, with the
scikit-learn its pickles were written by, and only the standard library and that package imported here:

    python3 -m venv .cache/injection-classifier
    .cache/injection-classifier/bin/pip install prompt-injection-detector==0.1.0 scikit-learn==1.8.0 \
        joblib==1.6.0 numpy==2.4.6 scipy==1.17.1
    .venv/bin/python benchmarks/model_flag_bench.py --texts-out .cache/flag-texts.jsonl
    .cache/injection-classifier/bin/python benchmarks/injection_classifier.py .cache/flag-texts.jsonl \
        .cache/flag-scores.jsonl
    .venv/bin/python benchmarks/model_flag_bench.py --scores .cache/flag-scores.jsonl \
        --scorer "prompt-injection-detector 0.1.0 (lr-tfidf-v1)" --out benchmarks/model_flags_classifier.json

It reads the texts (one JSON object a line, with "text": a string, or a structured state, given to the classifier
as its JSON) and writes one `{"score": risk}` a line, in order: the package's risk score, its model's probability
that the text is an injection.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: injection_classifier.py TEXTS.jsonl SCORES.jsonl", file=sys.stderr)
        return 2
    from prompt_injection_detector import Scanner  # the outside environment's package

    scanner = Scanner()
    states = [json.loads(line)["text"] for line in Path(argv[0]).read_text(encoding="utf-8").splitlines() if line]
    texts = [s if isinstance(s, str) else json.dumps(s, ensure_ascii=False) for s in states]
    with Path(argv[1]).open("w", encoding="utf-8") as out:
        for text in texts:
            out.write(json.dumps({"score": round(scanner.scan(text).risk_score, 6)}) + "\n")
    print(f"scored {len(texts)} texts into {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
