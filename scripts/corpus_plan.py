#!/usr/bin/python3
"""Plans a synthetic speech corpus and writes its manifests; called by make-corpus.sh.

  corpus_plan.py plan DIR [options]   writes DIR/plan.tsv: one line per utterance
  corpus_plan.py finish DIR           writes DIR/{train,valid,test}.tsv from the plan and
                                      the audio present, and prints hours per split

Sentences come from Debian's text packages (fortunes, wordnet-base example
sentences, dict-gcide definitions), are normalized to lower-case [a-z' ] and
kept only when they have 5-20 words, each of them in the word list. The
distinct sentences are sorted, shuffled with the seed and cut into disjoint
train/valid/test pools *before* any utterance is planned, so no sentence is
ever in two splits. Every random choice comes from one random.Random(seed),
so the same options and the same installed packages give the same plan.
"""

import argparse
import glob
import gzip
import math
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
# that sound like a human speaker (robot, demonic, whisper and croak variants
# are left out).
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
ESPEAK_SPEED = (130, 200)  # words per minute (-s)
ESPEAK_PITCH = (30, 70)  # 0-99 (-p)
ESPEAK_FRACTION = 2 / 3  # the rest is flite

# flite voices with the range of int_f0_target_mean (Hz) that sounds natural;
# rms ignores that parameter, so its pitch is left at the voice's own.
FLITE_PITCH = {"kal": (80, 130), "kal16": (80, 130), "awb": (85, 135), "rms": None,
               "slt": (140, 210)}
FLITE_STRETCH = (0.8, 1.25)  # duration_stretch

NOISE_TYPES = ["white", "pink", "brown"]
# make-corpus.sh makes NOISE_SECONDS of each noise type at 16 kHz; an
# utterance takes its noise from noise_start, at most the first
# NOISE_SECONDS - MAX_UTTERANCE_SECONDS.
NOISE_SECONDS = 120
MAX_UTTERANCE_SECONDS = 30
REVERBERANCE = (20, 70)  # sox reverb, percent
GAIN_DB = (-20.0, -1.0)  # peak level after sox gain -n, dBFS

# Duration model used only to turn --hours into a number of utterances:
# seconds = words * seconds_per_word + fixed, fitted on generated audio.
ESPEAK_SECONDS_PER_WORD_AT_175_WPM = 0.285
FLITE_SECONDS_PER_WORD = 0.30
SILENCE_SECONDS = 0.35

PLAN_COLUMNS = ["split", "id", "path", "sentence", "engine", "voice", "speed", "pitch",
                "noise", "snr_db", "noise_start", "reverb", "reverberance", "gain_db"]
SPLITS = ["train", "valid", "test"]


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
    words = load_word_list()
    sources = [("fortunes", FORTUNE_DIR, fortune_texts), ("wordnet-base", WORDNET_DIR,
               wordnet_texts), ("dict-gcide", GCIDE, gcide_texts)]
    pool = set()
    for package, path, texts in sources:
        if not os.path.exists(path):
            fail(f"{path} is missing (Debian package {package})")
        for text in texts():
            sentence = normalize(text, words)
            if sentence is not None:
                pool.add(sentence)
    return sorted(pool)


def estimated_seconds(utterance):
    n_words = utterance["sentence"].count(" ") + 1
    if utterance["engine"] == "espeak-ng":
        return n_words * ESPEAK_SECONDS_PER_WORD_AT_175_WPM * 175 / utterance["speed"] + \
            SILENCE_SECONDS
    return n_words * FLITE_SECONDS_PER_WORD * utterance["speed"] + SILENCE_SECONDS


def plan_utterance(rng, args, sentence):
    utterance = {"sentence": sentence}
    if rng.random() < ESPEAK_FRACTION:
        utterance["engine"] = "espeak-ng"
        utterance["voice"] = rng.choice(ESPEAK_VOICES) + "+" + rng.choice(ESPEAK_VARIANTS)
        utterance["speed"] = rng.randint(*ESPEAK_SPEED)
        utterance["pitch"] = rng.randint(*ESPEAK_PITCH)
    else:
        utterance["engine"] = "flite"
        utterance["voice"] = rng.choice(sorted(FLITE_PITCH))
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
    return utterance


def split_counts(total, args):
    n_valid = round(total * args.valid_fraction)
    n_test = round(total * args.test_fraction)
    return {"train": total - n_valid - n_test, "valid": n_valid, "test": n_test}


def plan(args):
    if args.utterances is not None and args.utterances < 1:
        fail(f"--utterances {args.utterances} must be at least 1")
    if args.hours is not None and not args.hours > 0:
        fail(f"--hours {args.hours} must be positive")
    if not (args.valid_fraction >= 0 and args.test_fraction >= 0 and
            args.valid_fraction + args.test_fraction < 1):
        fail(f"--valid-fraction {args.valid_fraction} and --test-fraction "
             f"{args.test_fraction} must be >= 0 and sum to less than 1")
    if not 0 <= args.snr_min <= args.snr_max:
        fail(f"need 0 <= --snr-min ({args.snr_min}) <= --snr-max ({args.snr_max})")
    if not 0 <= args.reverb_fraction <= 1:
        fail(f"--reverb-fraction {args.reverb_fraction} must be in [0, 1]")

    sentences = sentence_pool()
    rng = random.Random(args.seed)
    rng.shuffle(sentences)
    sentence_counts = split_counts(len(sentences), args)
    pools, start = {}, 0
    for split in SPLITS:
        pools[split] = sentences[start:start + sentence_counts[split]]
        start += sentence_counts[split]

    # Utterances are planned round-robin over the splits in proportion to their
    # fractions, so --hours can stop at any point with the fractions respected.
    weights = {"train": 1 - args.valid_fraction - args.test_fraction,
               "valid": args.valid_fraction, "test": args.test_fraction}
    planned = {split: [] for split in SPLITS}
    total_seconds = 0.0
    n = 0
    while True:
        if args.utterances is not None and n == args.utterances:
            break
        if args.hours is not None and total_seconds >= args.hours * 3600:
            break
        # The split furthest behind its share gets the next utterance.
        split = max(SPLITS, key=lambda s: weights[s] * (n + 1) - len(planned[s]))
        pool = pools[split]
        if not pool:
            fail(f"no sentences for split {split}")
        utterance = plan_utterance(rng, args, pool[len(planned[split]) % len(pool)])
        planned[split].append(utterance)
        total_seconds += estimated_seconds(utterance)
        n += 1

    os.makedirs(args.dir, exist_ok=True)
    lines = [f"# make-corpus plan: seed={args.seed} utterances={args.utterances} "
             f"hours={args.hours} format={args.format} valid_fraction={args.valid_fraction} "
             f"test_fraction={args.test_fraction} snr={args.snr_min}..{args.snr_max} "
             f"reverb_fraction={args.reverb_fraction} sentences={len(sentences)}",
             "\t".join(PLAN_COLUMNS)]
    for split in SPLITS:
        for index, utterance in enumerate(planned[split]):
            utterance["split"] = split
            utterance["id"] = f"{split}-{index:07d}"
            utterance["path"] = f"{split}/{index // 1000:04d}/{utterance['id']}.{args.format}"
            lines.append("\t".join(str(utterance[c]) for c in PLAN_COLUMNS))
    text = "\n".join(lines) + "\n"

    # Utterances are planned in the same order for any size, so a run with a
    # larger size and the same other options extends an existing corpus.
    plan_path = os.path.join(args.dir, "plan.tsv")
    if os.path.exists(plan_path):
        new_rows = {row["id"]: row for row in parse_plan(plan_path, text)}
        for row in read_plan(args.dir):
            if new_rows.get(row["id"]) != row:
                fail(f"{plan_path} has utterance {row['id']} planned otherwise (other options, "
                     "seed or text packages); rerun with its options (a larger --hours or "
                     "--utterances may extend it) or use a new --out")
    with open(plan_path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(plan_path + ".tmp", plan_path)


def parse_plan(plan_path, text):
    rows = []
    for line_number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#") or line.startswith("split\t"):
            continue
        fields = line.split("\t")
        if len(fields) != len(PLAN_COLUMNS):
            fail(f"{plan_path}:{line_number}: {len(fields)} fields, expected "
                 f"{len(PLAN_COLUMNS)}: {line!r}")
        rows.append(dict(zip(PLAN_COLUMNS, fields)))
    return rows


def read_plan(directory):
    plan_path = os.path.join(directory, "plan.tsv")
    with open(plan_path, encoding="utf-8") as f:
        return parse_plan(plan_path, f.read())


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


def finish(args):
    rows = read_plan(args.dir)
    manifests = {split: [] for split in SPLITS}
    seconds = {split: 0.0 for split in SPLITS}
    missing = []
    for row in rows:
        path = os.path.join(args.dir, row["path"])
        if not os.path.exists(path):
            missing.append(row["id"])
            continue
        manifests[row["split"]].append(f"{row['path']}\t{row['sentence']}\n")
        seconds[row["split"]] += audio_seconds(path)
    for split in SPLITS:
        manifest_path = os.path.join(args.dir, f"{split}.tsv")
        with open(manifest_path + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(manifests[split])
        os.replace(manifest_path + ".tmp", manifest_path)
    for split in SPLITS:
        count = len(manifests[split])
        mean = seconds[split] / count if count else 0.0
        print(f"{split:5s}: {count:7d} utterances, {seconds[split] / 3600:8.3f} h "
              f"(mean {mean:.2f} s)  -> {os.path.join(args.dir, split + '.tsv')}")
    total = sum(seconds.values())
    print(f"total: {sum(len(m) for m in manifests.values()):7d} utterances, "
          f"{total / 3600:8.3f} h")
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
    plan_parser.add_argument("--seed", type=int, default=1)
    plan_parser.add_argument("--format", choices=["flac", "wav"], default="flac")
    plan_parser.add_argument("--valid-fraction", type=float, default=0.05)
    plan_parser.add_argument("--test-fraction", type=float, default=0.05)
    plan_parser.add_argument("--snr-min", type=float, default=10.0)
    plan_parser.add_argument("--snr-max", type=float, default=30.0)
    plan_parser.add_argument("--reverb-fraction", type=float, default=0.3)
    finish_parser = commands.add_parser("finish")
    finish_parser.add_argument("dir")
    args = parser.parse_args()
    if args.command == "plan":
        plan(args)
    else:
        finish(args)


if __name__ == "__main__":
    main()
