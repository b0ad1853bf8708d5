#!/usr/bin/python3
"""Plans a synthetic speech corpus and writes its manifests; called by make-corpus.sh.

  corpus_plan.py plan DIR [options]   writes DIR/plan.tsv: one line per utterance, and
                                      DIR/lm-text.txt: the pool's sentences that no valid
                                      or test split has, the text an LM may learn from
  corpus_plan.py finish DIR           writes DIR/SPLIT.tsv for every split of the plan from
                                      the audio present, and prints (and writes to
                                      DIR/stats.txt) hours, durations and variety per split

Sentences come from Debian's text packages (fortunes, wordnet-base example
sentences, dict-gcide definitions), are normalized to lower-case [a-z' ] and
kept only when they have 5-20 words, each of them in the word list. The
distinct sentences are sorted, shuffled with the seed and cut into disjoint
pools, one per split, *before* any utterance is planned, so no sentence is
ever in two splits. Every random choice comes from one random.Random(seed),
so the same options and the same installed packages give the same plan.

Two profiles:
  demo  splits train, valid, test, sized by fractions of the whole; espeak-ng
        (8 English voices x 87 variants) and flite (5 voices) with their own
        speed and pitch, white/pink/brown noise, reverb, gain. With
        --hold-out-voices the family HELDOUT_* speaks none of them, and a
        fourth split, test-unseen, has test's sentences again, in test's
        order, spoken by that family only (drawn from an RNG of its own, so
        the other splits do not depend on it): the same sentences from voices
        training heard and from voices it did not.
  wide  splits train, valid-seen, test-seen, valid-unseen, test-unseen. The
        held-out family HELDOUT_* (Scottish English: espeak-ng's en-gb-scotland
        with 13 variants that no other split uses, and flite's awb) speaks
        only the -unseen splits; every other voice speaks the other three.
        valid/test splits have a fixed number of utterances each and train
        has --hours or --utterances, so a larger train set leaves them as
        they were. On top of demo's variety: whisper and croak variants, sox
        pitch shifts (which move the formants too) and tempo changes, clean
        speech besides the noises, reverb of several room sizes and dampings,
        band-limited and telephone (300-3400 Hz, 8 kHz mu-law) channels.
"""

import argparse
import glob
import gzip
import os
import random
import re
import struct
import sys
import wave

WORD_LIST = "/usr/share/dict/american-english"
FORTUNE_DIR = "/usr/share/games/fortunes"
WORDNET_DIR = "/usr/share/wordnet"
GCIDE = "/usr/share/dictd/gcide.dict.dz"

MIN_WORDS, MAX_WORDS = 5, 20
# Words the synthesizers expand into other words ("mr" is read "mister"), so
# the transcript would not match the audio.
EXPANDED_WORDS = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "ok", "ft", "lb", "lbs", "oz",
    "pm", "mt", "co", "inc", "ltd", "esp", "viz", "cf", "ie", "eg",
}

# espeak-ng English voices and the voice variants of espeak-ng-data/voices/!v
# that sound like a human speaker (robot and demonic variants are left out;
# whisper and croak only in the wide profile, ESPEAK_WIDE_VARIANTS).
ESPEAK_VOICES = [
    "en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
    "en-029", "en-us-nyc",
]
ESPEAK_VARIANTS = [
    "Alex", "Alicia", "Andrea", "Andy", "Annie", "AnxiousAndy", "Denis", "Diogo", "Gene",
    "Gene2", "Henrique", "Hugo", "Jacky", "Lee", "Marco", "Mario", "Michael", "Mike",
    "Mr serious", "Nguyen", "RicishayMax", "RicishayMax2", "RicishayMax3", "Storm", "Tweaky",
    "adam", "anika", "announcer", "antonio", "aunty", "belinda", "benjamin", "boris", "caleb",
    "david", "ed", "edward", "edward2", "f1", "f2", "f3", "f4", "f5", "fast", "grandma",
    "grandpa", "gustave", "iven", "iven2", "iven3", "iven4", "john", "kaukovalta", "klatt",
    "klatt2", "klatt3", "klatt4", "klatt5", "klatt6", "linda", "m1", "m2", "m3", "m4", "m5",
    "m6", "m7", "m8", "marcelo", "max", "michel", "miguel", "norbert", "pablo", "paul", "pedro",
    "quincy", "rob", "robert", "sandro", "shelby", "steph", "steph2", "steph3", "travis",
    "victor", "zac",
]
ESPEAK_WIDE_VARIANTS = ESPEAK_VARIANTS + ["croak", "whisper", "whisperf"]
ESPEAK_SPEED = (130, 200)  # words per minute (-s)
ESPEAK_PITCH = (30, 70)  # 0-99 (-p)
ESPEAK_FRACTION = 2 / 3  # the rest is flite

# flite voices with the range of int_f0_target_mean (Hz) that sounds natural;
# rms ignores that parameter, so its pitch is left at the voice's own.
FLITE_PITCH = {"kal": (80, 130), "kal16": (80, 130), "awb": (85, 135), "rms": None,
               "slt": (140, 210)}
FLITE_STRETCH = (0.8, 1.25)  # duration_stretch

# The held-out voice family of the wide profile: Scottish English speakers.
# An espeak-ng voice is an accent (the base voice: phonemes, rhythm) times a
# speaker (the variant: pitch, formants, voicing, breath), so a voice never
# heard needs both new: the base en-gb-scotland with variants that no seen
# voice uses (whole families such as steph..steph3; female, male and Klatt
# ones). flite's awb is a recorded Scottish speaker; kal, kal16, rms and slt
# keep flite's engines in training, so the test is of new speakers, not of a
# synthesizer never heard.
HELDOUT_ESPEAK_VOICE = "en-gb-scotland"
HELDOUT_ESPEAK_VARIANTS = ["Gene", "Gene2", "aunty", "f4", "iven", "iven2", "iven3", "iven4",
                           "klatt3", "m7", "steph", "steph2", "steph3"]
HELDOUT_FLITE_VOICES = ["awb"]

NOISE_TYPES = ["white", "pink", "brown"]
# make-corpus.sh makes NOISE_SECONDS of each noise type at 16 kHz; an
# utterance takes its noise from noise_start, at most the first
# NOISE_SECONDS - MAX_UTTERANCE_SECONDS.
NOISE_SECONDS = 120
MAX_UTTERANCE_SECONDS = 30
REVERBERANCE = (20, 70)  # sox reverb, percent
GAIN_DB = (-20.0, -1.0)  # peak level after sox gain -n, dBFS

# The wide profile's further variety (shares of utterances and ranges).
CLEAN_FRACTION = 0.1  # no noise added
PITCH_SHIFT_FRACTION, PITCH_SHIFT_CENTS = 0.5, (-300, 300)  # sox pitch: formants move too
TEMPO_FRACTION, TEMPO = 0.3, (0.85, 1.15)  # sox tempo: speed without pitch
ROOM_SCALE = (20, 100)  # sox reverb room-scale, percent
HF_DAMPING = (10, 90)  # sox reverb HF-damping, percent
# Channels: none, band-limited (sox sinc LOW-HIGH) or telephone (300-3400 Hz,
# 8 kHz, mu-law).
CHANNEL_WEIGHTS = {"none": 0.55, "band": 0.25, "telephone": 0.2}
BAND_LOW, BAND_HIGH = (100, 400), (3000, 7000)  # Hz

# Duration model used only to turn --hours into a number of utterances:
# seconds = words * seconds_per_word + fixed, fitted on generated audio.
ESPEAK_SECONDS_PER_WORD_AT_175_WPM = 0.285
FLITE_SECONDS_PER_WORD = 0.30
SILENCE_SECONDS = 0.35

# Columns from "source" on were added with the wide profile; a plan written
# without them reads as if they held DEFAULTS (nothing done).
PLAN_COLUMNS = ["split", "id", "path", "sentence", "engine", "voice", "speed", "pitch",
                "noise", "snr_db", "noise_start", "reverb", "reverberance", "gain_db",
                "source", "pitch_cents", "tempo", "room_scale", "hf_damping", "channel",
                "band_low", "band_high"]
DEFAULTS = {"source": "-", "pitch_cents": "0", "tempo": "1", "room_scale": "-",
            "hf_damping": "-", "channel": "none", "band_low": "0", "band_high": "0"}
SPLITS = {"demo": ["train", "valid", "test"],
          "wide": ["train", "valid-seen", "test-seen", "valid-unseen", "test-unseen"]}


def fail(message):
    sys.exit(f"corpus_plan.py: error: {message}")


def load_word_list():
    """Lower-case words of the word list; capitalized entries (names) are left out
    except the pronoun I and its contractions, and so are single letters but a and i."""
    if not os.path.exists(WORD_LIST):
        fail(f"{WORD_LIST} is missing (Debian package wamerican)")
    words = set()
    with open(WORD_LIST, encoding="utf-8", errors="replace") as f:
        for line in f:
            word = line.strip()
            if word.islower() or word == "I" or word.startswith("I'"):
                words.add(word.lower())
    return {w for w in words if len(w) > 1 or w in ("a", "i")} - EXPANDED_WORDS


SPLIT_SENTENCES = re.compile(r"(?<=[.!?;])\s+")
# Punctuation between words becomes a space; the typographic apostrophe becomes '.
PUNCTUATION = str.maketrans({**{c: " " for c in ',:;"()!?.`-'}, "\u2019": "'"})
ALLOWED = re.compile(r"[a-z' ]+")


def normalize(text, words):
    """Returns the sentence as lower-case words joined by one space, or None when it
    has other characters, a word outside the word list, or a bad length."""
    text = text.lower().translate(PUNCTUATION)
    if not ALLOWED.fullmatch(text):
        return None
    tokens = [token.strip("'") for token in text.split()]
    if not MIN_WORDS <= len(tokens) <= MAX_WORDS or not words.issuperset(tokens):
        return None
    return " ".join(tokens)


def fortune_texts():
    for path in sorted(glob.glob(os.path.join(FORTUNE_DIR, "*"))):
        if os.path.islink(path) or not os.path.isfile(path) or "." in os.path.basename(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            entries = f.read().split("\n%\n")
        for entry in entries:
            # Attribution lines start with "--" after indentation.
            lines = [line for line in entry.split("\n") if not line.lstrip().startswith("--")]
            yield from SPLIT_SENTENCES.split(" ".join(lines))


QUOTED = re.compile(r'"([^"]+)"')


def wordnet_texts():
    for part in ["adj", "adv", "noun", "verb"]:
        with open(os.path.join(WORDNET_DIR, f"data.{part}"), encoding="utf-8",
                  errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # license header
                yield from QUOTED.findall(line.split("|", 1)[1])


GCIDE_MARKUP = re.compile(r"\([^)]*\)|\[[^\]]*\]|\{|\}|--\s*[A-Z][\w. ]*")


def gcide_texts():
    with gzip.open(GCIDE, "rt", encoding="utf-8", errors="replace") as f:
        paragraphs = f.read().split("\n\n")
    for paragraph in paragraphs:
        if "\\" in paragraph.split("\n", 1)[0]:
            continue  # headword line: pronunciation, etymology
        text = GCIDE_MARKUP.sub(" ", " ".join(paragraph.split()))
        text = re.sub(r"^\d+\.\s*|^\([a-z]\)\s*|^(Syn|Note):", "", text.strip())
        yield from SPLIT_SENTENCES.split(text)


def sentence_pool():
    """The distinct normalized sentences, sorted, and {sentence: the first package that has it}."""
    words = load_word_list()
    sources = [("fortunes", FORTUNE_DIR, fortune_texts), ("wordnet-base", WORDNET_DIR,
               wordnet_texts), ("dict-gcide", GCIDE, gcide_texts)]
    source_of = {}
    for package, path, texts in sources:
        if not os.path.exists(path):
            fail(f"{path} is missing (Debian package {package})")
        for text in texts():
            sentence = normalize(text, words)
            if sentence is not None:
                source_of.setdefault(sentence, package)
    return sorted(source_of), source_of


def estimated_seconds(utterance):
    n_words = utterance["sentence"].count(" ") + 1
    if utterance["engine"] == "espeak-ng":
        seconds = n_words * ESPEAK_SECONDS_PER_WORD_AT_175_WPM * 175 / utterance["speed"]
    else:
        seconds = n_words * FLITE_SECONDS_PER_WORD * utterance["speed"]
    return seconds / float(utterance.get("tempo", 1)) + SILENCE_SECONDS


def voices_of(profile, split, hold_out):
    """(espeak-ng base voices, espeak-ng variants, flite voices) that may speak in a
    split; hold_out: the held-out family speaks the -unseen splits only."""
    variants = ESPEAK_VARIANTS if profile == "demo" else ESPEAK_WIDE_VARIANTS
    if not hold_out:
        return ESPEAK_VOICES, variants, sorted(FLITE_PITCH)
    if split.endswith("-unseen"):
        return [HELDOUT_ESPEAK_VOICE], HELDOUT_ESPEAK_VARIANTS, HELDOUT_FLITE_VOICES
    return ([v for v in ESPEAK_VOICES if v != HELDOUT_ESPEAK_VOICE],
            [v for v in variants if v not in HELDOUT_ESPEAK_VARIANTS],
            [v for v in sorted(FLITE_PITCH) if v not in HELDOUT_FLITE_VOICES])


def splits_of(args):
    """The splits a plan has, in the order plan.tsv lists them."""
    if args.profile == "demo" and args.hold_out_voices:
        return SPLITS["demo"] + ["test-unseen"]
    return SPLITS[args.profile]


def plan_utterance(rng, args, sentence, voices):
    """One utterance's synthesis and degradation. The wide profile draws its
    further choices after demo's, so demo plans stay as they always were."""
    espeak_voices, espeak_variants, flite_voices = voices
    utterance = {"sentence": sentence}
    if rng.random() < ESPEAK_FRACTION:
        utterance["engine"] = "espeak-ng"
        utterance["voice"] = rng.choice(espeak_voices) + "+" + rng.choice(espeak_variants)
        utterance["speed"] = rng.randint(*ESPEAK_SPEED)
        utterance["pitch"] = rng.randint(*ESPEAK_PITCH)
    else:
        utterance["engine"] = "flite"
        utterance["voice"] = rng.choice(flite_voices)
        utterance["speed"] = round(rng.uniform(*FLITE_STRETCH), 3)
        pitch_range = FLITE_PITCH[utterance["voice"]]
        utterance["pitch"] = rng.randint(*pitch_range) if pitch_range else "-"
    utterance["noise"] = rng.choice(NOISE_TYPES)
    utterance["snr_db"] = round(rng.uniform(args.snr_min, args.snr_max), 2)
    utterance["noise_start"] = rng.randrange((NOISE_SECONDS - MAX_UTTERANCE_SECONDS) * 16000)
    reverb = rng.random() < args.reverb_fraction
    utterance["reverb"] = "yes" if reverb else "no"
    utterance["reverberance"] = rng.randint(*REVERBERANCE) if reverb else 0
    utterance["gain_db"] = round(rng.uniform(*GAIN_DB), 2)
    utterance.update(DEFAULTS)
    if args.profile == "demo":
        return utterance
    if rng.random() < CLEAN_FRACTION:
        utterance["noise"], utterance["snr_db"], utterance["noise_start"] = "none", "-", 0
    if rng.random() < PITCH_SHIFT_FRACTION:
        utterance["pitch_cents"] = rng.randint(*PITCH_SHIFT_CENTS)
    if rng.random() < TEMPO_FRACTION:
        utterance["tempo"] = round(rng.uniform(*TEMPO), 3)
    if reverb:
        utterance["room_scale"] = rng.randint(*ROOM_SCALE)
        utterance["hf_damping"] = rng.randint(*HF_DAMPING)
    channel = rng.choices(list(CHANNEL_WEIGHTS), weights=list(CHANNEL_WEIGHTS.values()))[0]
    utterance["channel"] = channel
    if channel == "band":
        utterance["band_low"] = rng.randint(*BAND_LOW)
        utterance["band_high"] = rng.randint(*BAND_HIGH)
    return utterance


def check_plan_args(args):
    if args.utterances is not None and args.utterances < 1:
        fail(f"--utterances {args.utterances} must be at least 1")
    if args.hours is not None and not args.hours > 0:
        fail(f"--hours {args.hours} must be positive")
    if not (args.valid_fraction >= 0 and args.test_fraction >= 0 and
            args.valid_fraction + args.test_fraction < 1):
        fail(f"--valid-fraction {args.valid_fraction} and --test-fraction "
             f"{args.test_fraction} must be >= 0 and sum to less than 1")
    if args.valid_utterances < 1 or args.test_utterances < 1:
        fail(f"--valid-utterances {args.valid_utterances} and --test-utterances "
             f"{args.test_utterances} must be at least 1")
    if not 0 <= args.snr_min <= args.snr_max:
        fail(f"need 0 <= --snr-min ({args.snr_min}) <= --snr-max ({args.snr_max})")
    if not 0 <= args.reverb_fraction <= 1:
        fail(f"--reverb-fraction {args.reverb_fraction} must be in [0, 1]")
    if args.hold_out_voices and args.profile != "demo":
        fail("--hold-out-voices is for the demo profile; the wide profile always holds out "
             "its voice family")


def plan_demo(args, rng, sentences):
    """train/valid/test by fractions of the sentences and of the utterances,
    planned round-robin so that --hours can stop at any point."""
    splits = SPLITS["demo"]
    n_valid = round(len(sentences) * args.valid_fraction)
    n_test = round(len(sentences) * args.test_fraction)
    sentence_counts = {"train": len(sentences) - n_valid - n_test, "valid": n_valid,
                       "test": n_test}
    pools, start = {}, 0
    for split in splits:
        pools[split] = sentences[start:start + sentence_counts[split]]
        start += sentence_counts[split]
    weights = {"train": 1 - args.valid_fraction - args.test_fraction,
               "valid": args.valid_fraction, "test": args.test_fraction}
    planned = {split: [] for split in splits}
    total_seconds = 0.0
    n = 0
    while True:
        if args.utterances is not None and n == args.utterances:
            break
        if args.hours is not None and total_seconds >= args.hours * 3600:
            break
        # The split furthest behind its share gets the next utterance.
        split = max(splits, key=lambda s: weights[s] * (n + 1) - len(planned[s]))
        pool = pools[split]
        if not pool:
            fail(f"no sentences for split {split}")
        utterance = plan_utterance(rng, args, pool[len(planned[split]) % len(pool)],
                                   voices_of("demo", split, args.hold_out_voices))
        planned[split].append(utterance)
        total_seconds += estimated_seconds(utterance)
        n += 1
    if args.hold_out_voices:
        # Its own RNG: a larger --hours extends test-unseen as it extends test.
        unseen_rng = random.Random(f"{args.seed}:test-unseen")
        voices = voices_of("demo", "test-unseen", True)
        planned["test-unseen"] = [plan_utterance(unseen_rng, args, utterance["sentence"], voices)
                                  for utterance in planned["test"]]
    return planned


def plan_wide(args, rng, sentences):
    """Each valid and test split first, a fixed number of utterances with one
    sentence each; then train, from the rest of the sentences, up to --hours or
    --utterances (train's alone)."""
    eval_counts = {"valid-seen": args.valid_utterances, "test-seen": args.test_utterances,
                   "valid-unseen": args.valid_utterances, "test-unseen": args.test_utterances}
    if sum(eval_counts.values()) >= len(sentences):
        fail(f"{sum(eval_counts.values())} valid and test utterances need as many sentences; "
             f"there are {len(sentences)}")
    planned, start = {}, 0
    for split, count in eval_counts.items():
        voices = voices_of("wide", split, True)
        planned[split] = [plan_utterance(rng, args, sentence, voices)
                          for sentence in sentences[start:start + count]]
        start += count
    train_pool, voices = sentences[start:], voices_of("wide", "train", True)
    planned["train"] = []
    total_seconds = 0.0
    while True:
        if args.utterances is not None and len(planned["train"]) == args.utterances:
            break
        if args.hours is not None and total_seconds >= args.hours * 3600:
            break
        sentence = train_pool[len(planned["train"]) % len(train_pool)]
        utterance = plan_utterance(rng, args, sentence, voices)
        planned["train"].append(utterance)
        total_seconds += estimated_seconds(utterance)
    return planned


def plan(args):
    if args.snr_min is None:
        args.snr_min = 5.0 if args.profile == "wide" else 10.0
    check_plan_args(args)
    sentences, source_of = sentence_pool()
    rng = random.Random(args.seed)
    rng.shuffle(sentences)
    planned = (plan_wide if args.profile == "wide" else plan_demo)(args, rng, sentences)

    os.makedirs(args.dir, exist_ok=True)
    sizes = (f"valid_fraction={args.valid_fraction} test_fraction={args.test_fraction}"
             if args.profile == "demo" else
             f"valid_utterances={args.valid_utterances} test_utterances={args.test_utterances}")
    lines = [f"# make-corpus plan: profile={args.profile} seed={args.seed} "
             f"utterances={args.utterances} hours={args.hours} format={args.format} {sizes} "
             f"snr={args.snr_min}..{args.snr_max} reverb_fraction={args.reverb_fraction} "
             f"sentences={len(sentences)}" + (" hold_out_voices" if args.hold_out_voices else ""),
             "\t".join(PLAN_COLUMNS)]
    for split in splits_of(args):
        for index, utterance in enumerate(planned[split]):
            utterance["split"] = split
            utterance["id"] = f"{split}-{index:07d}"
            utterance["path"] = f"{split}/{index // 1000:04d}/{utterance['id']}.{args.format}"
            utterance["source"] = source_of[utterance["sentence"]]
            lines.append("\t".join(str(utterance[c]) for c in PLAN_COLUMNS))
    text = "\n".join(lines) + "\n"

    # Utterances are planned in the same order for any size, so a run with a
    # larger size and the same other options extends an existing corpus.
    plan_path = os.path.join(args.dir, "plan.tsv")
    if os.path.exists(plan_path):
        new_rows = {row["id"]: row for row in parse_plan(plan_path, text)}
        for row in read_plan(args.dir, fill_defaults=False):
            new_row = new_rows.get(row["id"], {})
            if any(new_row.get(column) != value for column, value in row.items()):
                fail(f"{plan_path} has utterance {row['id']} planned otherwise (other options, "
                     "seed or text packages); rerun with its options (a larger --hours or "
                     "--utterances may extend it) or use a new --out")
    with open(plan_path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(plan_path + ".tmp", plan_path)
    write_lm_text(args.dir, sentences, planned)


def write_lm_text(directory, sentences, planned):
    """DIR/lm-text.txt: every sentence of the pool that no valid or test split
    speaks, sorted, one a line: the text a language model may learn from
    (LibriSpeech's LM corpus is the same: its books less those of dev and test).
    Train speaks only some of them; the rest is text of the same sources."""
    held = {u["sentence"] for split, utterances in planned.items() if split != "train"
            for u in utterances}
    lm_path = os.path.join(directory, "lm-text.txt")
    with open(lm_path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(sentence + "\n" for sentence in sorted(set(sentences) - held))
    os.replace(lm_path + ".tmp", lm_path)


def parse_plan(plan_path, text, fill_defaults=True):
    """The rows of a plan as {column: value}, with the columns its header line
    names; with fill_defaults, columns it lacks (an older plan) get DEFAULTS."""
    rows, columns = [], PLAN_COLUMNS
    for line_number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if line.startswith("split\t"):
            columns = fields
            unknown = [c for c in columns if c not in PLAN_COLUMNS]
            lacking = [c for c in PLAN_COLUMNS if c not in columns and c not in DEFAULTS]
            if unknown or lacking:
                fail(f"{plan_path}:{line_number}: header with unknown columns {unknown} or "
                     f"without {lacking}")
            continue
        if len(fields) != len(columns):
            fail(f"{plan_path}:{line_number}: {len(fields)} fields, expected "
                 f"{len(columns)}: {line!r}")
        row = dict(zip(columns, fields))
        if fill_defaults:
            row = {c: row.get(c, DEFAULTS.get(c)) for c in PLAN_COLUMNS}
        rows.append(row)
    return rows


def read_plan(directory, fill_defaults=True):
    plan_path = os.path.join(directory, "plan.tsv")
    with open(plan_path, encoding="utf-8") as f:
        return parse_plan(plan_path, f.read(), fill_defaults)


def audio_seconds(path):
    """Duration from the file header: FLAC STREAMINFO or the WAV header."""
    if path.endswith(".wav"):
        with wave.open(path) as w:
            return w.getnframes() / w.getframerate()
    with open(path, "rb") as f:
        header = f.read(4 + 4 + 34)
    if header[:4] != b"fLaC" or len(header) < 42:
        fail(f"{path}: not a FLAC file")
    # STREAMINFO bytes 10..17: 20-bit sample rate, 3-bit channels-1,
    # 5-bit bits-1, 36-bit total samples.
    packed = struct.unpack(">Q", header[18:26])[0]
    sample_rate = packed >> 44
    total_samples = packed & ((1 << 36) - 1)
    return total_samples / sample_rate


def share(rows, condition):
    return f"{100 * sum(1 for row in rows if condition(row)) / len(rows):.0f}%" if rows else "-"


def split_statistics(split, rows, seconds):
    """Lines describing one split: size, durations, voices and degradations."""
    espeak = [row for row in rows if row["engine"] == "espeak-ng"]
    flite = [row for row in rows if row["engine"] == "flite"]
    bases = {row["voice"].split("+")[0] for row in espeak}
    variants = {row["voice"].split("+", 1)[1] for row in espeak}
    sources = {}
    for row in rows:
        sources[row["source"]] = sources.get(row["source"], 0) + 1
    durations = sorted(seconds)
    mean = sum(durations) / len(durations) if durations else 0.0
    shortest, longest = (durations[0], durations[-1]) if durations else (0.0, 0.0)
    return [
        f"{split:12s} {len(rows):7d} utterances {sum(durations) / 3600:8.3f} h  "
        f"mean {mean:.2f} s ({shortest:.1f}-{longest:.1f} s)",
        f"{'':12s} voices: {len({row['voice'] for row in rows})} distinct; espeak-ng "
        f"{share(rows, lambda r: r['engine'] == 'espeak-ng')} ({len(bases)} base voices x "
        f"{len(variants)} variants), flite {share(rows, lambda r: r['engine'] == 'flite')} "
        f"({', '.join(sorted({row['voice'] for row in flite})) or '-'})",
        f"{'':12s} noise {share(rows, lambda r: r['noise'] != 'none')}, reverb "
        f"{share(rows, lambda r: r['reverb'] == 'yes')}, pitch-shifted "
        f"{share(rows, lambda r: r['pitch_cents'] != '0')}, tempo-changed "
        f"{share(rows, lambda r: r['tempo'] != '1')}, band-limited "
        f"{share(rows, lambda r: r['channel'] == 'band')}, telephone "
        f"{share(rows, lambda r: r['channel'] == 'telephone')}",
        f"{'':12s} text: " + ", ".join(f"{source} {100 * count / len(rows):.0f}%"
                                       for source, count in sorted(sources.items())),
    ]


def finish(args):
    rows = read_plan(args.dir)
    splits = list(dict.fromkeys(row["split"] for row in rows))
    manifests = {split: [] for split in splits}
    made = {split: [] for split in splits}
    seconds = {split: [] for split in splits}
    missing = []
    for row in rows:
        path = os.path.join(args.dir, row["path"])
        if not os.path.exists(path):
            missing.append(row["id"])
            continue
        manifests[row["split"]].append(f"{row['path']}\t{row['sentence']}\n")
        made[row["split"]].append(row)
        seconds[row["split"]].append(audio_seconds(path))
    for split in splits:
        manifest_path = os.path.join(args.dir, f"{split}.tsv")
        with open(manifest_path + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(manifests[split])
        os.replace(manifest_path + ".tmp", manifest_path)
    for split in splits:
        count = len(manifests[split])
        mean = sum(seconds[split]) / count if count else 0.0
        print(f"{split + ':':13s} {count:7d} utterances, {sum(seconds[split]) / 3600:8.3f} h "
              f"(mean {mean:.2f} s)  -> {os.path.join(args.dir, split + '.tsv')}")
    total = sum(sum(s) for s in seconds.values())
    print(f"{'total:':13s} {sum(len(m) for m in manifests.values()):7d} utterances, "
          f"{total / 3600:8.3f} h")
    statistics = []
    for split in splits:
        statistics += split_statistics(split, made[split], seconds[split])
    with open(os.path.join(args.dir, "stats.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(statistics) + "\n")
    print("\n".join(statistics))
    if missing:
        fail(f"{len(missing)} planned utterances have no audio (first: {missing[0]}); "
             "run make-corpus.sh again with the same options to resume")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    plan_parser = commands.add_parser("plan")
    plan_parser.add_argument("dir")
    size = plan_parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--utterances", type=int)
    size.add_argument("--hours", type=float)
    plan_parser.add_argument("--profile", choices=["demo", "wide"], default="demo")
    plan_parser.add_argument("--seed", type=int, default=1)
    plan_parser.add_argument("--format", choices=["flac", "wav"], default="flac")
    plan_parser.add_argument("--valid-fraction", type=float, default=0.05)
    plan_parser.add_argument("--test-fraction", type=float, default=0.05)
    plan_parser.add_argument("--valid-utterances", type=int, default=300)
    plan_parser.add_argument("--test-utterances", type=int, default=600)
    plan_parser.add_argument("--snr-min", type=float)  # default: 5 (wide), 10 (demo)
    plan_parser.add_argument("--snr-max", type=float, default=30.0)
    plan_parser.add_argument("--reverb-fraction", type=float, default=0.3)
    plan_parser.add_argument("--hold-out-voices", action="store_true")
    finish_parser = commands.add_parser("finish")
    finish_parser.add_argument("dir")
    args = parser.parse_args()
    if args.command == "plan":
        plan(args)
    else:
        finish(args)


if __name__ == "__main__":
    main()
