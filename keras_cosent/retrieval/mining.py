"""Hard-negative mining for (query, positive, negatives...) training rows.

Semantics (those of sentence-transformers' `mine_hard_negatives`, with its
`absolute_margin` / `relative_margin`, but for the two differences below): for
each (query, positive) the corpus is searched exactly in chunks
(`keras_cosent.retrieval.top_k`, memory bounded) for the `range_max` best
candidates by cosine; every known positive of the query is removed; the rank
window `[range_min, range_max)` of what remains is kept; a candidate is then
dropped when `score > positive_score - margin` (absolute margin) or
`score > positive_score - |positive_score| * relative_margin` (relative margin:
`positive_score * (1 - relative_margin)` for a positive score, and below the
positive, not above it, for a negative one), because the nearest neighbours
above the positive are often unlabelled positives. From the survivors
`num_negatives` are taken, the best ones (`sampling="top"`) or a seeded random
draw in rank order (`sampling="random"`). A window narrower than
`num_negatives` leaves rows short (`short_rows`).

The peer's miner differs in two ways, which leave the rows equal where
`range_min` is 0 and each query has one positive (measured on the STS-B
retrieval dev split, 263 rows): it drops the candidates the margins reject
first and skips `range_min` of the rest, where this cuts the rank window first;
and it gives a query with several positives one list of negatives, under the
margin of its lowest-scoring positive, where here each (query, positive) row
has its own, under its positive's margin. Smaller differences remain where
those do not apply: equal scores are ranked in corpus order here and in
`torch.topk`'s there (texts a model reads alike tie, as Chinese characters
that an English vocabulary reads as [UNK] do); the peer fetches `range_max`
candidates plus the most positives any query has, so a query with fewer
reaches deeper; its n-tuple output leaves out a row short of negatives, which
is written short here (or filled, `fill`); and its random sampling draws from
Python's unseeded global generator, which no seeded draw here can repeat.

A weak starting encoder often ranks the labelled positive low, so that every
candidate in the window scores above it and the margin leaves the row with no
negative; a trainer that drops such rows then never sees most of its data.
`fill="random"` completes those rows with documents drawn at random (seeded)
from the rest of the corpus: never a known positive, never a candidate the
margin would drop (each draw is scored against the query); these are about as
easy as in-batch negatives, so the row trains as it would without mining.

A blank document (empty or whitespace text) is never a negative, mined or
filled; nor is a document whose text is a known positive's under another id, nor
a positive of another query with the same text (one anchor, as the peer merges
such queries).
A text that the corpus holds under several ids is one candidate, its best
ranked copy (the peer's miner drops repeated texts from its corpus): a row
never holds the same negative twice, and the rank window counts texts.

`ignore_identical_ids=True` also treats the document whose id is the query's
own as off limits, as BEIR's search does: in sets whose queries are corpus
documents too (ArguAna, Quora) it is the query itself, the worst negative.
"""

import collections
import collections.abc

import numpy as np

from keras_cosent.retrieval._validation import check_distinct_as_strings
from keras_cosent.retrieval._validation import check_encoder
from keras_cosent.retrieval._validation import check_nested_mapping
from keras_cosent.retrieval._validation import check_qrels
from keras_cosent.retrieval._validation import some_ids
from keras_cosent.retrieval.search import _normalize
from keras_cosent.retrieval.search import _normalized_chunks
from keras_cosent.retrieval.search import top_k
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_finite_float
from keras_cosent.utils.arguments import check_non_negative_int
from keras_cosent.utils.arguments import check_positive_int
from keras_cosent.utils.arguments import is_int

# Scores a deeper search of crowded queries holds at once (its groups of queries
# times its depth): 128 MiB of float32 scores and int64 indices.
_DEEPER_SEARCH_ENTRIES = 2**24 // 3


def _as_ids_and_texts(items, what):
    if isinstance(items, collections.abc.Mapping):
        check_distinct_as_strings(items, what)
        return [str(i) for i in items], [str(t) for t in items.values()]
    if isinstance(items, (str, bytes)) or not isinstance(items, collections.abc.Iterable):
        raise TypeError(
            f"`{what}` should be a mapping {{id: text}} or a list of texts. "
            f"Received: `{what}` of type {type(items).__name__}"
        )
    items = [str(t) for t in items]
    return [str(i) for i in range(len(items))], items


def _positions(positives, num_queries, num_docs):
    """The list form of `positives` checked: one list of corpus positions per query."""
    if isinstance(positives, (str, bytes)) or not isinstance(positives, collections.abc.Iterable):
        raise TypeError(
            "`positives` should be qrels {query_id: {doc_id: score}} or one list of corpus "
            f"indices per query. Received: `positives` of type {type(positives).__name__}"
        )
    positives = list(positives)
    if len(positives) != num_queries:
        raise ValueError(
            f"`positives` should have one list per query ({num_queries}). "
            f"Received {len(positives)}."
        )
    checked = []
    for i, row in enumerate(positives):
        if isinstance(row, (str, bytes)) or not isinstance(row, collections.abc.Iterable):
            raise ValueError(
                f"`positives[{i}]` should be a list of corpus indices. Received: {row!r}"
            )
        row = list(row)
        bad = [j for j in row if not is_int(j) or not 0 <= j < num_docs]
        if bad:
            raise ValueError(
                f"`positives[{i}]` should hold corpus indices, ints from 0 to {num_docs - 1}. "
                f"Received: {bad[0]!r}"
            )
        checked.append([int(j) for j in row])
    return checked


def _check_embeddings(embeddings, count, name, what):
    """`embeddings` as an array, or raises unless it is 2-D with one row per text."""
    embeddings = np.asarray(embeddings)
    if embeddings.ndim != 2 or embeddings.shape[0] != count:
        raise ValueError(
            f"{name} should have one row per text of `{what}`: shape ({count}, dim). "
            f"Received shape {embeddings.shape}."
        )
    return embeddings


def _check_finite(embeddings, ids, what):
    """Raises if a row of `embeddings` is not finite: its neighbours would mean nothing."""
    bad = np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
    if bad.size:
        raise ValueError(
            f"The embeddings of `{what}` are not finite (NaN or inf) for {bad.size} of the "
            f"{len(ids)} texts (first: id {ids[bad[0]]!r}); the encoder's weights may have "
            "diverged. No negative is mined from them."
        )


def _random_fill(rng, text_id, count, accept, acceptable):
    """Up to `count` corpus indices of distinct texts drawn by `rng` among the acceptable ones.

    `text_id[j]` numbers document j's text (copies share it); `accept(j)` judges
    one index; `acceptable()` gives the boolean mask over the whole corpus,
    computed only when rejection sampling keeps missing.
    """
    chosen, texts = [], set()
    for _ in range(64 * count):
        if len(chosen) == count:
            return chosen
        j = int(rng.integers(len(text_id)))
        if text_id[j] not in texts and accept(j):
            chosen.append(j)
            texts.add(text_id[j])
    mask = acceptable() & ~np.isin(text_id, list(texts))
    allowed = np.flatnonzero(mask)
    # One copy of each text: its first acceptable one.
    allowed = allowed[np.sort(np.unique(text_id[allowed], return_index=True)[1])]
    extra = rng.choice(len(allowed), size=min(count - len(chosen), len(allowed)), replace=False)
    return chosen + [int(j) for j in np.sort(allowed[extra])]


def mine_hard_negatives(
    queries,
    corpus,
    positives,
    encoder=None,
    query_embeddings=None,
    corpus_embeddings=None,
    num_negatives=3,
    range_min=0,
    range_max=50,
    margin=None,
    relative_margin=None,
    sampling="top",
    fill=None,
    seed=0,
    batch_size=32,
    chunk_size=16384,
    use_faiss=False,
    ignore_identical_ids=False,
):
    """Mines hard negatives; returns `(rows, report)`.

    Args:
        queries: `{query_id: text}` or a list of texts (ids are their positions).
        corpus: `{doc_id: text}` or a list of texts.
        positives: qrels `{query_id: {doc_id: score}}` (score >= 1 is a positive;
            a document judged 0, "not relevant", may be mined as a negative;
            ids compared as str, like those of `queries` and `corpus`) or, for
            lists, one list of positive corpus indices (ints from 0 to
            `len(corpus) - 1`) per query.
        encoder: object with `encode(texts, batch_size=...)`; not needed when
            both `query_embeddings` and `corpus_embeddings` are given.
        query_embeddings, corpus_embeddings: precomputed `(len(queries), dim)`
            and `(len(corpus), dim)` arrays, rows in the order of `queries`
            and `corpus`.
        num_negatives: negatives per row, a positive int.
        range_min, range_max: rank window (0-based, known positives removed),
            ints with `0 <= range_min < range_max`. The window counts texts:
            copies of a text and blank documents take no rank (a query whose
            top ranks they crowd is searched deeper until its window holds
            `range_max` texts, or the corpus has no more).
        margin: absolute margin below the positive's score (a finite number),
            or `None`.
        relative_margin: relative margin in [0, 1), or `None`: candidates
            scoring above `positive_score - |positive_score| * relative_margin`
            are dropped.
        sampling: `"top"` or `"random"` (seeded by `seed`).
        fill: `None` (a row keeps the negatives it found) or `"random"`
            (missing negatives are drawn at random, seeded by `seed`, from the
            corpus documents that are neither known positives of the query
            nor rejected by the margins).
        seed: seeds `sampling="random"` and `fill="random"`.
        batch_size: texts per `encoder.encode` call, a positive int.
        chunk_size: corpus rows scored at once, a positive int (as in
            `keras_cosent.retrieval.search`, which ranks the corpus).
        use_faiss: `True` to search with faiss, `None` to use it when
            installed, `False` (default) for the exact NumPy search (see
            `keras_cosent.retrieval.search`).
        ignore_identical_ids: never take the document whose id is the query's
            id as a negative (with lists, ids are positions).

    Returns:
        `rows`: lists `[query, positive, negative_1, ...]`, one per (query,
        positive), writable with `keras_cosent.data.write_retrieval_triplets`;
        `report`: dict with `rows`, `queries` (queries with at least one
        row), `short_rows` (rows with fewer mined
        negatives than asked), `short_queries`, `filled_rows` (short rows
        completed by `fill`; fewer than `short_rows` only when the corpus has
        too few documents left), `blank_rows` ((query, positive) pairs left out
        because the query's or the positive's text is blank: no training row,
        and `write_retrieval_triplets` refuses them), `blank_documents` (corpus
        documents whose text is blank: never taken as negatives),
        `repeated_documents` (non-blank documents whose text an earlier document
        holds: each text is one candidate) and `num_negatives`.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.retrieval import mine_hard_negatives
    >>> rows, report = mine_hard_negatives(
    ...     ["q"], ["pos", "near", "far"], [[0]],
    ...     query_embeddings=np.array([[1.0, 0.0]]),
    ...     corpus_embeddings=np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]),
    ...     num_negatives=1)
    >>> rows
    [['q', 'pos', 'near']]
    """
    if sampling not in ("top", "random"):
        raise ValueError(f"`sampling` should be 'top' or 'random'. Received: {sampling!r}")
    if fill not in (None, "random"):
        raise ValueError(f"`fill` should be None or 'random'. Received: {fill!r}")
    range_min = check_non_negative_int("range_min", range_min)
    range_max = check_positive_int("range_max", range_max)
    if not range_min < range_max:
        raise ValueError(
            f"Expected 0 <= range_min < range_max. Received: range_min={range_min}, "
            f"range_max={range_max}"
        )
    num_negatives = check_positive_int("num_negatives", num_negatives)
    if margin is not None:
        margin = check_finite_float("margin", margin)
    if relative_margin is not None and not 0 <= check_finite_float(
            "relative_margin", relative_margin) < 1:
        raise ValueError(f"`relative_margin` should be in [0, 1). Received: {relative_margin}")
    check_encoder(encoder)
    batch_size = check_positive_int("batch_size", batch_size)
    chunk_size = check_positive_int("chunk_size", chunk_size)
    check_bool("use_faiss", use_faiss, allow_none=True)
    ignore_identical_ids = check_bool("ignore_identical_ids", ignore_identical_ids)
    query_ids, query_texts = _as_ids_and_texts(queries, "queries")
    doc_ids, doc_texts = _as_ids_and_texts(corpus, "corpus")
    if not doc_ids:
        raise ValueError("`corpus` should hold at least one document. Received: 0 documents.")
    doc_index = {d: i for i, d in enumerate(doc_ids)}
    if isinstance(positives, collections.abc.Mapping):
        # Ids compared as str, as those of `queries` and `corpus` are.
        check_nested_mapping("positives", positives, "{doc_id: int relevance}")
        check_distinct_as_strings(positives, "positives")
        for qid, judged in positives.items():
            check_distinct_as_strings(judged, f"positives[{qid!r}]")
        check_qrels(positives)
        positives = {str(q): {str(d): s for d, s in judged.items()}
                     for q, judged in positives.items()}
        known_queries = set(query_ids)
        unknown = [q for q in positives if q not in known_queries]
        if unknown:
            raise ValueError(
                f"`positives` name {len(unknown)} queries that `queries` lacks (ids are "
                f"compared as strings), such as {some_ids(unknown)}; `queries` has "
                f"{some_ids(query_ids)}."
            )
        positive_index = []
        for qid in query_ids:
            judged = positives.get(qid, {})
            missing = [d for d in judged if d not in doc_index]
            if missing:
                raise ValueError(f"qrels of query {qid!r} name unknown documents {missing[:5]}")
            positive_index.append([doc_index[d] for d, s in judged.items() if s >= 1])
    else:
        positive_index = _positions(positives, len(query_ids), len(doc_ids))
    # Precomputed embeddings are checked before the encoder computes the other side.
    if query_embeddings is not None:
        query_embeddings = _check_embeddings(
            query_embeddings, len(query_ids), "`query_embeddings`", "queries")
    if corpus_embeddings is not None:
        corpus_embeddings = _check_embeddings(
            corpus_embeddings, len(doc_ids), "`corpus_embeddings`", "corpus")
    if query_embeddings is None or corpus_embeddings is None:
        if encoder is None:
            raise ValueError("Pass `encoder=` or both `query_embeddings` and `corpus_embeddings`.")
        if query_embeddings is None:
            query_embeddings = _check_embeddings(
                encoder.encode(query_texts, batch_size=batch_size), len(query_ids),
                "`encoder.encode(queries)`", "queries")
        if corpus_embeddings is None:
            corpus_embeddings = _check_embeddings(
                encoder.encode(doc_texts, batch_size=batch_size), len(doc_ids),
                "`encoder.encode(corpus)`", "corpus")
    for embeddings, ids, what in ((query_embeddings, query_ids, "queries"),
                                  (corpus_embeddings, doc_ids, "corpus")):
        _check_finite(embeddings, ids, what)
    q = _normalize(query_embeddings)
    # The corpus is normalised where it is read (a row, or top_k's chunks), never
    # copied whole: the same values as normalising it once, at a chunk's memory.
    num_docs = corpus_embeddings.shape[0]

    def cosine(qi, j):
        return float(q[qi] @ _normalize(corpus_embeddings[j : j + 1])[0])

    def cosines(qi):
        return np.concatenate(
            [block @ q[qi] for _, block in _normalized_chunks(corpus_embeddings, chunk_size)]
        )

    # A document with a known positive's text under another id is that positive:
    # as a negative it would push the query away from its own answer (the peer's
    # miner, which drops repeated texts from its corpus, never takes one either).
    positive_texts = {doc_texts[j] for pos in positive_index for j in pos if doc_texts[j].strip()}
    same_text = collections.defaultdict(list)
    for j, text in enumerate(doc_texts):
        if text in positive_texts:
            same_text[text].append(j)

    def known(pos):
        # Made per query where it is needed, not held for every query at once.
        return set(pos).union(*(same_text.get(doc_texts[p], ()) for p in pos))

    # Queries with one text are one anchor: each one's positives are the others'
    # known positives too, or a row would push that text away from a document
    # another row pulls it to (the peer's miner merges such queries).
    anchor_positives = collections.defaultdict(set)
    for qi, pos in enumerate(positive_index):
        anchor_positives[query_texts[qi]].update(pos)

    # Copies of a text share its number: a row takes each text once.
    first_of_text = {}
    text_id = np.array([first_of_text.setdefault(text, j) for j, text in enumerate(doc_texts)])
    repeated_docs = sum(1 for j, text in enumerate(doc_texts)
                        if text_id[j] != j and text.strip())
    max_pos = max((len(known(pos)) for pos in anchor_positives.values()), default=0)
    own = [doc_index.get(qid) if ignore_identical_ids else None for qid in query_ids]
    # A blank document is never a negative: it would teach the query only to
    # move away from the empty string's embedding. The search goes deeper by
    # as many (at most `range_max` more, which bounds its memory); a query
    # whose window more blank documents or copies crowd is searched again below.
    blank_docs = {j for j, text in enumerate(doc_texts) if not text.strip()}
    # Repeated texts take ranks in the search as blank documents do.
    k = min(range_max + max_pos + ignore_identical_ids
            + min(len(blank_docs) + repeated_docs, range_max), num_docs)
    # top_k normalises both sides as `q` and `cosine` do, but its matrix products
    # sum in another order than `cosine`'s dot product: a positive's score is
    # taken from top_k's own scores where it was retrieved, so that a document
    # scoring exactly as much as the positive (a duplicate) compares as equal.
    scores, indices = top_k(query_embeddings, corpus_embeddings, k, chunk_size=chunk_size,
                            use_faiss=use_faiss)

    def off_limits_of(qi):
        # Blank documents are off limits too, checked apart: not copied into
        # every query's set.
        return (known(anchor_positives[query_texts[qi]])
                | ({own[qi]} if own[qi] is not None else set()))

    def window(qi, row_scores, row_indices, off_limits):
        """The query's candidates, best first, each text once (at most `range_max`),
        and the scores of its positives the search retrieved."""
        candidates, seen = [], set()
        for s, j in zip(row_scores, row_indices):
            j = int(j)
            if j not in off_limits and j not in blank_docs and text_id[j] not in seen:
                seen.add(text_id[j])  # its best ranked copy stands for a repeated text
                candidates.append((float(s), j))
                if len(candidates) == range_max:
                    break
        retrieved = {int(j): float(s) for s, j in zip(row_scores, row_indices)
                     if int(j) in off_limits}
        return candidates, retrieved

    # Where more copies or blank documents than the extra depth crowd a query's
    # top ranks, its window would hold fewer than `range_max` texts: those
    # queries are searched again, twice as deep each time, in groups of
    # bounded size, until their window is full or the corpus is searched.
    deeper = {}
    crowded = [qi for qi in range(len(positive_index))
               if k < num_docs and query_texts[qi].strip()
               and len(window(qi, scores[qi], indices[qi], off_limits_of(qi))[0]) < range_max]
    depth, query_rows = k, np.asarray(query_embeddings)
    while crowded:
        depth = min(2 * depth, num_docs)
        group = max(1, _DEEPER_SEARCH_ENTRIES // depth)
        for start in range(0, len(crowded), group):
            part = crowded[start : start + group]
            part_scores, part_indices = top_k(query_rows[part], corpus_embeddings, depth,
                                              chunk_size=chunk_size, use_faiss=use_faiss)
            for row, qi in enumerate(part):
                deeper[qi] = window(qi, part_scores[row], part_indices[row], off_limits_of(qi))
        crowded = [] if depth == num_docs else [
            qi for qi in crowded if len(deeper[qi][0]) < range_max]

    rng = np.random.default_rng(seed)
    rows, short_rows, short_queries, filled_rows, blank_rows = [], 0, set(), 0, 0
    row_queries = 0
    for qi, pos in enumerate(positive_index):
        first_row = len(rows)
        if not query_texts[qi].strip():
            blank_rows += len(pos)
            continue
        off_limits = off_limits_of(qi)
        candidates, retrieved = deeper[qi] if qi in deeper else window(
            qi, scores[qi], indices[qi], off_limits)
        candidates = candidates[range_min:range_max]
        for p in pos:
            if not doc_texts[p].strip():
                blank_rows += 1  # still off limits as a negative
                continue
            pos_score = retrieved[p] if p in retrieved else cosine(qi, p)

            def passes(s):
                # Works on one score or an array of them.
                return (True if margin is None else s <= pos_score - margin) & (
                    True if relative_margin is None
                    else s <= pos_score - abs(pos_score) * relative_margin
                )

            kept = [j for s, j in candidates if passes(s)]
            if sampling == "random" and len(kept) > num_negatives:
                chosen = np.sort(rng.choice(len(kept), size=num_negatives, replace=False))
                kept = [kept[i] for i in chosen]
            kept = kept[:num_negatives]
            if len(kept) < num_negatives:
                short_rows += 1
                short_queries.add(query_ids[qi])
                if fill == "random":
                    taken = off_limits | set(kept)
                    taken_texts = {text_id[j] for j in kept}

                    def acceptable():
                        # passes() is a plain True when no margin applies: one per document.
                        mask = np.array(np.broadcast_to(passes(cosines(qi)), num_docs), dtype=bool)
                        mask[list(taken)] = False
                        mask[list(blank_docs)] = False
                        mask[np.isin(text_id, list(taken_texts))] = False
                        return mask

                    kept += _random_fill(
                        rng, text_id, num_negatives - len(kept),
                        lambda j: (j not in taken and j not in blank_docs
                                   and text_id[j] not in taken_texts
                                   and bool(passes(cosine(qi, j)))),
                        acceptable,
                    )
                    filled_rows += len(kept) == num_negatives
            rows.append([query_texts[qi], doc_texts[p]] + [doc_texts[j] for j in kept])
        row_queries += len(rows) > first_row
    report = {
        "rows": len(rows),
        "queries": row_queries,
        "short_rows": short_rows,
        "short_queries": len(short_queries),
        "filled_rows": filled_rows,
        "blank_rows": blank_rows,
        "blank_documents": len(blank_docs),
        "repeated_documents": repeated_docs,
        "num_negatives": num_negatives,
    }
    return rows, report
