"""Long multi-session dialogs with questions, generated from a seed, for the context evaluation.

``generate_dialog(seed, language="en")`` builds one conversation between a user and an
assistant over several dated sessions (about 300-700 messages), in English or Chinese:

- **facts** stated in natural language, mostly in the early sessions: names (people, pets),
  places, dates, amounts, preferences, decisions, identifiers (booking codes, file paths),
  and events whose only date is the session's own timestamp;
- **superseded facts**: a value stated early and corrected later (the question asks for the
  latest one, so only its words count as the answer);
- **distractors**: the same kinds of fact about other people, in the same templates;
- **filler**: thanks, greetings, chit-chat, near-duplicate restatements of what was said,
  and generic assistant replies.

Each :class:`Question` carries the answer words a prompt must hold for the question to be
answerable. Every template comes in several phrasings and every slot draws from a
vocabulary, so each seed gives a different conversation: the evaluation measures whether
specific facts survive, not one fixed test set. Nothing is stored on disk.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Dialog", "Question", "answer_words", "generate_dialog", "generate_dialogs"]

Message = dict[str, Any]


@dataclass(frozen=True)
class Question:
    """A question about the dialog; ``answer_words`` must be in a prompt that can answer it."""

    text: str
    answer: str
    answer_words: tuple[str, ...]
    kind: str
    session: int  # the session the answer was (last) stated in


@dataclass
class Dialog:
    seed: int
    language: str
    messages: list[Message]
    questions: list[Question]
    session_dates: list[str] = field(default_factory=list)


_WORD_RE = re.compile(
    r"\d{4}年\d{1,2}月\d{1,2}日|[A-Za-z0-9]+(?:[-_./:,][A-Za-z0-9]+)*|[\u3400-\u4dbf\u4e00-\u9fff]+"
)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_STOP = frozenset(
    "a an the of in on at to for and or is was are my his her their our its by with from "
    "de la le".split()
)


def answer_words(answer: str) -> tuple[str, ...]:
    """The words of ``answer`` a prompt must contain: Latin words and numbers lowercased,
    stopwords dropped; each run of Chinese characters is one word (matched as a substring)."""
    words = [w.lower() for w in _WORD_RE.findall(answer)]
    out: list[str] = []
    for w in words:
        # a lone Chinese character beside other words is a unit (年, 元), not the answer
        if w in _STOP or w in out or (len(w) == 1 and _CJK.match(w) and len(words) > 1):
            continue
        out.append(w)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Vocabularies
# ---------------------------------------------------------------------------------------------

_EN = {
    "first": "Marguerite Tobias Ingrid Desmond Priya Oleander Kwame Svetlana Horatio Leontyne "
    "Ezekiel Rosalind Anouk Thaddeus Yusuf Philippa Benedikt Catalina Ignatius Maelis".split(),
    "last": "Okonkwo Lindqvist Abernathy Castellanos Whitcombe Haraldsen Moreau Takahashi "
    "Fitzgerald Oyelaran Kowalczyk Delacroix Vasquez Penhaligon Rutherford".split(),
    "pet": "dog cat parrot rabbit tortoise ferret hamster".split(),
    "petname": "Biscuit Pickle Waffles Nugget Pepper Marzipan Juniper Ziggy Clementine Bramble "
    "Noodle Paprika Ruffles Dumpling".split(),
    "city": "Lisbon Reykjavik Montevideo Ljubljana Tbilisi Valparaiso Kraków Hobart Windhoek "
    "Asheville Trondheim Cartagena Bratislava Kyoto Marrakesh Tallinn".split(),
    "food": "ramen paella falafel goulash pierogi ceviche risotto bibimbap moussaka tamales "
    "laksa shakshuka".split(),
    "instrument": "cello banjo ukulele harp oboe accordion mandolin trombone".split(),
    "sport": "fencing bouldering rowing badminton curling archery kayaking".split(),
    "company": "Brightline Corvus Halcyon Northwind Quillfeather Stonebridge Verdant Larkspur".split(),
    "street": "Juniper Lane|Alder Street|Kestrel Road|Mulberry Court|Harbor View Drive|Sorrel Way".split(
        "|"
    ),
    "book": "The Salt Road|Winter Orchard|A Map of Tides|The Glass Cartographer|Lanterns at Noon|"
    "Echoes of Ashford".split("|"),
    "relative": "sister brother cousin niece nephew aunt uncle".split(),
    "color": "teal mustard burgundy lavender olive coral".split(),
    "project": "harvest lighthouse falcon quartz meridian tundra".split(),
    "hobby": "pottery|calligraphy|woodworking|beekeeping|salsa dancing|knitting|rock climbing".split(
        "|"
    ),
    "volunteer": "animal shelter|community garden|food bank|public library|soup kitchen".split("|"),
    "research": "adoption agencies|solar panels|electric bikes|homeschooling|sailing courses".split(
        "|"
    ),
    "event": "support group meeting|charity run|poetry reading|pride parade|school fundraiser".split(
        "|"
    ),
}
_ZH = {
    "first": "张伟 李娜 王芳 刘洋 陈静 杨帆 赵磊 黄蕾 周婷 吴昊 徐明 孙悦 马超 朱琳".split(),
    "pet": "狗 猫 鹦鹉 兔子 乌龟 仓鼠".split(),
    "petname": "豆豆 团团 花卷 糯米 可乐 布丁 芝麻 年糕 汤圆 小满".split(),
    "city": "成都 杭州 西安 厦门 昆明 青岛 大理 哈尔滨 桂林 苏州 拉萨 洛阳".split(),
    "food": "火锅 小笼包 麻辣烫 煎饼果子 酸菜鱼 肉夹馍 烤鸭 螺蛳粉 凉皮 担担面".split(),
    "instrument": "古筝 二胡 琵琶 钢琴 小提琴 笛子".split(),
    "sport": "羽毛球 乒乓球 游泳 攀岩 太极拳 滑雪".split(),
    "company": "星河科技 青松资本 远航物流 云帆教育 明德医药 华锦传媒".split(),
    "street": "梧桐路 银杏街 丁香巷 海棠路 枫林大道 青石巷".split(),
    "book": "《海上灯塔》 《山河故人》 《雨夜来信》 《风起长安》 《星空下的约定》".split(),
    "relative": "姐姐 哥哥 表妹 侄子 舅舅 姑姑".split(),
    "color": "墨绿 藏青 米白 酒红 浅灰".split(),
    "project": "启明 扬帆 磐石 灵犀 天枢".split(),
    "hobby": "陶艺 书法 木工 养蜂 编织 插花".split(),
    "volunteer": "流浪动物救助站 社区菜园 图书馆 养老院 食物银行".split(),
    "event": "互助小组聚会 慈善长跑 诗歌朗诵会 校园义卖 公益讲座".split(),
}
_ZH_SURNAME = "欧阳 司马 诸葛 上官 慕容 东方".split()


def _code(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return (
        "".join(rng.choice(letters) for _ in range(rng.randint(2, 3)))
        + "-"
        + str(rng.randint(1000, 99999))
    )


def _fmt_date(d: dt.date, lang: str) -> str:
    if lang == "zh":
        return f"{d.year}年{d.month}月{d.day}日"
    return f"{d.day} {d.strftime('%B')} {d.year}"


# ---------------------------------------------------------------------------------------------
# Fact templates: (statement phrasings, question, answer) per kind and language
# ---------------------------------------------------------------------------------------------


@dataclass
class _Fact:
    kind: str
    statements: list[str]  # alternative phrasings, one is said
    question: str
    answer: str
    restate: list[str] = field(default_factory=list)  # near-duplicate mentions (filler)
    correction: list[str] | None = None  # a later statement superseding the answer
    corrected_answer: str | None = None
    speaker: str = "user"


def _about(facts: list[_Fact], who: str) -> list[_Fact]:
    """A friend's facts said only in phrasings that name the friend, when the question does:
    otherwise the user's fact and the friend's would read the same."""
    for f in facts:
        if who in f.question:
            f.statements = [x for x in f.statements if who in x] or f.statements
            if f.correction:
                f.correction = [x for x in f.correction if who in x] or f.correction
    return facts


def _facts_en(rng: random.Random, who: str, ctx: dict[str, Any]) -> list[_Fact]:
    """All fact kinds for subject ``who`` ("my" for the user, else a friend's name)."""
    v = _EN
    pick = rng.choice
    own = who == "my"
    subj = "I" if own else who
    poss = "my" if own else f"{who}'s"
    about = "the user" if own else who
    out: list[_Fact] = []

    pet, name = pick(v["pet"]), pick(v["petname"])
    out.append(
        _Fact(
            "name",
            [
                f"{'We' if own else who} finally adopted a {pet}! {'We' if own else 'They'} named "
                f"{'her' if rng.random() < 0.5 else 'him'} {name}.",
                f"Big news: there's a new {pet} in {'our' if own else poss} home, called {name}.",
                f"{poss.capitalize()} {pet} is named {name}, after a character from a cartoon.",
            ],
            f"What is the name of {'the user' if own else who}{chr(39)}s {pet}?",
            name,
            restate=[f"{name} knocked over a plant again today.", f"{name} says hi, by the way!"],
        )
    )
    city, city2 = rng.sample(v["city"], 2)
    rel = pick(v["relative"])
    out.append(
        _Fact(
            "place",
            [
                f"{poss.capitalize()} {rel}'s wedding will be in {city}, so I'm already looking at flights.",
                f"Guess where {poss} {rel} is getting married? {city}! The whole family is going.",
                f"The venue for {poss} {rel}'s wedding is booked: it's in {city}.",
            ],
            f"In which city is {'the user' + chr(39) + 's' if own else who + chr(39) + 's'} {rel} getting married?",
            city,
            correction=[
                f"Change of plans: {poss} {rel}'s wedding moved from {city} to {city2}.",
                f"Update on the wedding - it's no longer in {city}, they switched it to {city2}.",
            ],
            corrected_answer=city2,
        )
    )
    first, last = pick(v["first"]), pick(v["last"])
    comp = pick(v["company"])
    out.append(
        _Fact(
            "person",
            [
                f"{subj} {'have' if own else 'has'} a new manager at {comp}, her name is {first} {last}.",
                f"{poss.capitalize()} new boss at {comp} is {first} {last}; she seems nice so far.",
                f"Met {poss} new team lead today, {first} {last}. {comp} hired her from outside.",
            ],
            f"Who is {about}{chr(39) + 's' if not own else chr(39) + 's'} new manager?",
            f"{first} {last}",
        )
    )
    out.append(
        _Fact(
            "place",
            [
                f"{subj} just started a job at {comp}.",
                f"The offer from {comp} came through, {subj} accepted it!",
            ],
            f"Which company did {about} join?",
            comp,
        )
    )
    amount = rng.randint(9, 48) * 50
    street = pick(v["street"])
    num = rng.randint(3, 220)
    out.append(
        _Fact(
            "number",
            [
                f"The new flat on {street} costs ${amount:,} a month, which is steep but worth it.",
                f"Rent for the place on {street} is ${amount:,} per month.",
                f"{subj} signed the lease: {num} {street}, ${amount:,} monthly.",
            ],
            f"How much is the monthly rent of {'the user' + chr(39) + 's' if own else who + chr(39) + 's'} flat?",
            f"${amount:,}",
        )
    )
    food, food2 = rng.sample(v["food"], 2)
    out.append(
        _Fact(
            "preference",
            [
                f"Honestly {subj} could eat {food} every day, but {food2} is a hard no.",
                f"{'My' if own else who + chr(39) + 's'} favourite dish is {food}; {food2} I just can't stand.",
                f"If you ever pick a restaurant for {'me' if own else who}, {food} is the safe bet.",
            ],
            f"What is {about}{chr(39)}s favourite food?",
            food,
        )
    )
    inst = pick(v["instrument"])
    out.append(
        _Fact(
            "session_date",
            [
                f"Today {subj} had {'my' if own else 'a'} very first {inst} lesson!",
                f"{subj} started {inst} lessons today, finally.",
            ],
            f"On what date did {about} start {inst} lessons?",
            "{session_date}",
        )
    )
    code = _code(rng)
    out.append(
        _Fact(
            "identifier",
            [
                f"The hotel booking reference is {code}, could you keep that handy?",
                f"{poss.capitalize()} hotel booking reference is {code}.",
                f"Confirmation code for the trip: {code}.",
                f"Note the reservation number {code} for later please.",
            ],
            "What is the hotel booking reference?" if own else f"What is {who}'s booking code?",
            code,
        )
    )
    proj = pick(v["project"])
    path = f"~/work/{proj}/reports/q{rng.randint(1, 4)}_summary_{rng.randint(2021, 2026)}.xlsx"
    out.append(
        _Fact(
            "identifier",
            [
                f"The spreadsheet for project {proj} lives in {path}.",
                f"I saved the {proj} numbers to {path} if you need them.",
            ],
            f"Where is the spreadsheet of project {proj} saved?",
            path,
        )
    )
    day = ctx["start"] + dt.timedelta(days=rng.randint(40, 300))
    sport = pick(v["sport"])
    out.append(
        _Fact(
            "date",
            [
                f"{poss.capitalize()} first {sport} tournament is on {_fmt_date(day, 'en')}.",
                f"Mark the calendar: {sport} competition on {_fmt_date(day, 'en')}.",
            ],
            f"When is {about}{chr(39)}s {sport} tournament?",
            _fmt_date(day, "en"),
        )
    )
    opt, opt2 = rng.sample(v["color"], 2)
    out.append(
        _Fact(
            "decision",
            [
                f"{'We' if own else who} decided to paint the living room {opt} instead of {opt2}.",
                f"After a long debate we settled on {opt} for the living room walls.",
            ],
            f"Which colour was chosen for {'the user' + chr(39) + 's' if own else who + chr(39) + 's'} living room?",
            opt,
        )
    )
    book = pick(v["book"])
    out.append(
        _Fact(
            "name",
            [
                f"The book club is reading {book} this month, {subj} {'am' if own else 'is'} hooked.",
                f"Just finished {book}; the ending surprised {'me' if own else 'them'}.",
            ],
            f"Which book did {about} read for the book club?",
            book,
        )
    )
    # facts in plain words: no capital letters, digits or codes to flag them
    hobby = pick(v["hobby"])
    out.append(
        _Fact(
            "activity",
            [
                f"Lately {subj} {'am' if own else 'is'} really into {hobby}; signed up for a class "
                "at the community centre.",
                f"{subj} picked up {hobby} this month and {'I' if own else 'they'} can't stop.",
            ],
            f"What new hobby did {about} take up?",
            hobby,
        )
    )
    place2 = pick(v["volunteer"])
    out.append(
        _Fact(
            "activity",
            [
                f"{subj} {'have' if own else 'has'} been volunteering at the {place2} on weekends.",
                f"Spent Saturday volunteering at the {place2} again, it's so rewarding.",
            ],
            f"Where does {about} volunteer?",
            place2,
        )
    )
    research = pick(v["research"])
    out.append(
        _Fact(
            "activity",
            [
                f"{subj} {'have' if own else 'has'} been researching {research} for weeks now.",
                f"Most evenings go into reading about {research} at the moment.",
            ],
            f"What has {about} been researching?",
            research,
        )
    )
    event = pick(v["event"])
    out.append(
        _Fact(
            "session_date",
            [
                f"{subj} went to a {event} today and it was so moving.",
                f"Just got back from a {event}, what an experience.",
            ],
            f"When did {about} go to the {event}?",
            "{session_date}",
        )
    )
    return out


def _facts_zh(rng: random.Random, who: str, ctx: dict[str, Any]) -> list[_Fact]:
    v = _ZH
    pick = rng.choice
    own = who == "我"
    about = "用户" if own else who
    out: list[_Fact] = []
    pet, name = pick(v["pet"]), pick(v["petname"])
    out.append(
        _Fact(
            "name",
            [
                f"{who}家新养了一只{pet}，名字叫{name}。",
                f"跟你说个好消息，{who}们领养了一只{pet}，给它取名{name}！",
                f"{who}的{pet}叫{name}，是朋友送的。",
            ],
            f"{about}养的{pet}叫什么名字？",
            name,
            restate=[f"{name}今天又把花盆打翻了。", f"{name}最近胃口特别好。"],
        )
    )
    city, city2 = rng.sample(v["city"], 2)
    rel = pick(v["relative"])
    out.append(
        _Fact(
            "place",
            [
                f"{who}{rel}的婚礼定在{city}举行，我正在看机票。",
                f"猜猜{who}{rel}在哪儿办婚礼？{city}！全家都要去。",
            ],
            f"{about}的{rel}在哪个城市办婚礼？",
            city,
            correction=[
                f"计划有变：{who}{rel}的婚礼从{city}改到{city2}了。",
                f"婚礼的事更新一下，不在{city}了，改成{city2}。",
            ],
            corrected_answer=city2,
        )
    )
    boss = pick(_ZH_SURNAME) + pick(v["first"])[1:]
    comp = pick(v["company"])
    out.append(
        _Fact(
            "person",
            [
                f"{who}在{comp}的新领导叫{boss}，人看起来挺好。",
                f"今天见到了新主管{boss}，{comp}从外面挖来的。",
            ],
            f"{about}的新领导是谁？",
            boss,
        )
    )
    amount = rng.randint(20, 150) * 100
    street = pick(v["street"])
    out.append(
        _Fact(
            "number",
            [
                f"{street}那套新房子每月房租{amount}元，有点贵但值得。",
                f"{who}签了{street}的租约，月租{amount}元。",
            ],
            f"{about}的新房子月租多少？",
            str(amount),
        )
    )
    food, food2 = rng.sample(v["food"], 2)
    out.append(
        _Fact(
            "preference",
            [
                f"说实话{who}最爱吃{food}，但{food2}完全接受不了。",
                f"以后帮{who}选餐厅的话，{food}肯定没错。",
            ],
            f"{about}最喜欢吃什么？",
            food,
        )
    )
    inst = pick(v["instrument"])
    out.append(
        _Fact(
            "session_date",
            [f"今天{who}上了第一节{inst}课！", f"{who}今天终于开始学{inst}了。"],
            f"{about}是哪天开始学{inst}的？",
            "{session_date}",
        )
    )
    code = _code(rng)
    out.append(
        _Fact(
            "identifier",
            [f"酒店预订号是{code}，帮我记一下。", f"{who}的酒店预订号是{code}。"],
            "酒店的预订号是多少？" if own else f"{who}的预订号是多少？",
            code,
        )
    )
    day = ctx["start"] + dt.timedelta(days=rng.randint(40, 300))
    sport = pick(v["sport"])
    out.append(
        _Fact(
            "date",
            [
                f"{who}的第一场{sport}比赛在{_fmt_date(day, 'zh')}。",
                f"记一下：{sport}比赛定在{_fmt_date(day, 'zh')}。",
            ],
            f"{about}的{sport}比赛是哪天？",
            _fmt_date(day, "zh"),
        )
    )
    opt, opt2 = rng.sample(v["color"], 2)
    out.append(
        _Fact(
            "decision",
            [f"{who}家客厅最后决定刷成{opt}，不用{opt2}了。", f"讨论了很久，客厅墙面定为{opt}。"],
            f"{about}的客厅选了什么颜色？",
            opt,
        )
    )
    book = pick(v["book"])
    out.append(
        _Fact(
            "name",
            [f"读书会这个月读{book}，{who}读得停不下来。", f"刚读完{book}，结局太意外了。"],
            f"{about}在读书会读了哪本书？",
            book,
        )
    )
    proj = pick(v["project"])
    path = f"~/work/{proj}/reports/q{rng.randint(1, 4)}_summary_{rng.randint(2021, 2026)}.xlsx"
    out.append(
        _Fact(
            "identifier",
            [f"{proj}项目的表格放在{path}。", f"我把{proj}的数据存到{path}了。"],
            f"{proj}项目的表格存在哪里？",
            path,
        )
    )
    hobby = pick(v["hobby"])
    out.append(
        _Fact(
            "activity",
            [
                f"最近{who}迷上了{hobby}，还在社区中心报了班。",
                f"{who}这个月开始学{hobby}，停不下来。",
            ],
            f"{about}最近迷上了什么爱好？",
            hobby,
        )
    )
    place2 = pick(v["volunteer"])
    out.append(
        _Fact(
            "activity",
            [f"{who}周末一直在{place2}做志愿者。", f"周六又去{place2}当志愿者了，很有意义。"],
            f"{about}在哪里做志愿者？",
            place2,
        )
    )
    event = pick(v["event"])
    out.append(
        _Fact(
            "session_date",
            [f"{who}今天去参加了一场{event}，特别感动。", f"刚参加完{event}回来，感触很深。"],
            f"{about}是哪天去参加{event}的？",
            "{session_date}",
        )
    )
    return out


# ---------------------------------------------------------------------------------------------
# Filler
# ---------------------------------------------------------------------------------------------

_FILLER = {
    "en": {
        "user": [
            "Thanks!",
            "Thank you so much, that helps.",
            "Haha, fair enough.",
            "Good morning! How are you today?",
            "Ugh, it's raining again here.",
            "I'm so tired this week, work has been a lot.",
            "Okay, sounds good.",
            "Hmm, let me think about that.",
            "Anyway, what should I cook tonight?",
            "Any tips for sleeping better?",
            "Do you think I should go for a run later?",
            "I watched a documentary about octopuses yesterday, fascinating stuff.",
            "Can you suggest a podcast for my commute?",
            "lol yes exactly",
            "Not much happening today, just chilling.",
            "What's a good stretch for a stiff neck?",
        ],
        "assistant": [
            "That sounds wonderful! Let me know if there is anything else I can help with.",
            "You're welcome! I'm always happy to help.",
            "I'm doing well, thanks for asking. How has your day been so far?",
            "That makes a lot of sense. It's important to take care of yourself during busy weeks.",
            "Great question. A simple option is a vegetable stir-fry with rice; it takes about twenty minutes.",
            "Consistent sleep times, less screen time before bed and a cool room usually help.",
            "A short run can lift your mood, as long as you warm up and listen to your body.",
            "Octopuses are remarkable: three hearts, blue blood and problem-solving skills.",
            "You might enjoy a history or science storytelling podcast; episodes are usually under an hour.",
            "Sounds like a relaxing day. Enjoy it!",
            "Gently tilting your head to each side and holding for twenty seconds can relieve stiffness.",
            "I understand. Take your time and let me know what you decide.",
        ],
    },
    "zh": {
        "user": [
            "谢谢！",
            "太感谢了，很有帮助。",
            "哈哈，好吧。",
            "早上好！今天怎么样？",
            "唉，这边又下雨了。",
            "这周好累，工作太多了。",
            "好的，没问题。",
            "嗯，我想想。",
            "对了，今晚做什么菜好呢？",
            "有什么改善睡眠的办法吗？",
            "你觉得我晚点要不要去跑步？",
            "昨天看了一部关于章鱼的纪录片，太有意思了。",
            "推荐个通勤听的播客吧。",
            "是的是的",
            "今天没什么事，就休息一下。",
        ],
        "assistant": [
            "听起来很棒！还有什么需要帮忙的随时告诉我。",
            "不客气！很高兴能帮到你。",
            "我很好，谢谢关心。你今天过得怎么样？",
            "很理解，忙的时候更要照顾好自己。",
            "可以试试番茄炒蛋配米饭，二十分钟就能做好。",
            "规律作息、睡前少看手机、保持房间凉爽，通常都有帮助。",
            "适当跑步能改善心情，记得先热身。",
            "章鱼确实很神奇：三颗心脏、蓝色血液，还会解决问题。",
            "可以听听历史或科普类的播客，每期一般不到一小时。",
            "好好休息，享受这一天吧！",
            "明白，慢慢考虑，决定了告诉我。",
        ],
    },
}
_CHAT = {
    "en": {
        "templates": [
            "Yesterday I went {activity} near the {landmark} with a colleague; the weather was "
            "{weather} and we ended up talking about {topic} for ages.",
            "I've been reading about {topic} lately. Did you know people argue about it a lot "
            "online? I spent way too long on it instead of {activity}.",
            "My neighbour keeps {activity} at odd hours, and now the whole building talks about "
            "{topic}. It's {weather} outside anyway, so I'm staying in.",
            "Random thought: would you rather go {activity} by the {landmark} or spend a "
            "{weather} afternoon learning about {topic}?",
        ],
        "activity": "hiking|cycling|jogging|sketching|birdwatching|window shopping|swimming".split(
            "|"
        ),
        "landmark": "old lighthouse|river bend|botanical garden|harbour|clock tower|farmers market".split(
            "|"
        ),
        "weather": "grey and drizzly|surprisingly warm|windy|freezing|perfectly sunny".split("|"),
        "topic": "sourdough starters|medieval castles|electric cars|black holes|houseplants|"
        "minimalism|board games|the history of tea".split("|"),
    },
    "zh": {
        "templates": [
            "昨天和同事去{landmark}附近{activity}，天气{weather}，我们聊{topic}聊了好久。",
            "最近一直在看关于{topic}的东西，网上争论特别多，结果本来想去{activity}也没去成。",
            "邻居总是大半夜{activity}，现在整栋楼都在讨论{topic}。外面{weather}，我就待在家里了。",
            "随便问问：你更想去{landmark}{activity}，还是在{weather}的下午了解一下{topic}？",
        ],
        "activity": "爬山 骑车 跑步 画画 观鸟 逛街 游泳".split(),
        "landmark": "老灯塔 江边 植物园 码头 钟楼 菜市场".split(),
        "weather": "阴沉沉 出奇地暖和 风很大 冷得要命 晴空万里".split(),
        "topic": "酸面包 古代城堡 电动汽车 黑洞 多肉植物 极简生活 桌游 茶的历史".split(),
    },
}


def _chat(rng: random.Random, lang: str) -> str:
    vocab = _CHAT[lang]
    return rng.choice(vocab["templates"]).format(
        **{k: rng.choice(v) for k, v in vocab.items() if k != "templates"}
    )


def _reply(rng: random.Random, lang: str, lo: int, hi: int) -> str:
    """An assistant reply of ``lo``..``hi`` generic sentences (no repeats)."""
    pool = _FILLER[lang]["assistant"]
    if lang == "zh":  # a Chinese sentence carries about half the tokens of an English one
        lo, hi = lo + 1, hi + 2
    return ("" if lang == "zh" else " ").join(rng.sample(pool, rng.randint(lo, hi)))


@functools.cache
def _corpus_pairs(lang: str) -> tuple[tuple[str, str], ...]:
    """(user, reply) pairs of real human-written chit-chat (the ``chatterbot-corpus``
    package, read through the test corpus module); empty when it is not installed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    try:
        from _corpus import _dialogs
    except ImportError:
        return ()
    try:
        convs = _dialogs().get("english" if lang == "en" else "chinese", [])
    except ImportError:  # chatterbot-corpus or PyYAML missing
        return ()
    return tuple((c[i], c[i + 1]) for c in convs for i in range(0, len(c) - 1, 2))


_ACK = {
    "en": [
        "Got it, I'll remember that.",
        "Noted! That's exciting news.",
        "Thanks for sharing, that's lovely.",
        "Oh nice, congratulations!",
        "Understood, I've made a note of it.",
    ],
    "zh": [
        "好的，我记住了。",
        "收到！真是好消息。",
        "谢谢分享，真不错。",
        "哇，恭喜！",
        "明白，已经记下了。",
    ],
}
_SESSION_OPEN = {
    "en": [
        "[{stamp}] Hi again!",
        "[{stamp}] Hey, I'm back.",
        "({stamp}) Hello! Long time no chat.",
        "[{stamp}] Morning!",
    ],
    "zh": ["[{stamp}] 又来找你聊天啦！", "（{stamp}）你好，我回来了。", "[{stamp}] 早上好！"],
}


def _stamp(d: dt.datetime, lang: str) -> str:
    if lang == "zh":
        return f"{d.year}年{d.month}月{d.day}日 {d.hour:02d}:{d.minute:02d}"
    return f"{d.hour % 12 or 12}:{d.minute:02d} {'pm' if d.hour >= 12 else 'am'} on {d.day} {d.strftime('%B')}, {d.year}"


# ---------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------


def generate_dialog(
    seed: int,
    *,
    language: str = "en",
    messages: tuple[int, int] = (300, 700),
    sessions: tuple[int, int] = (8, 18),
    real_filler: bool = True,
) -> Dialog:
    """One dialog from ``seed``: about ``messages`` messages over ``sessions`` dated sessions.

    Facts about the user (asked about) and about two friends (distractors, also asked about
    where their name makes the question distinct) are stated mostly in the first half of the
    sessions; corrections of some facts come in a later session. With ``real_filler`` (and
    the ``chatterbot-corpus`` package installed) a third of the small talk is real
    human-written chit-chat instead of this module's own phrases.
    """
    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', not {language!r}")
    rng = random.Random(f"{language}:{seed}")
    target = rng.randint(*messages)
    n_sessions = rng.randint(*sessions)
    start = dt.datetime(rng.randint(2021, 2025), rng.randint(1, 12), rng.randint(1, 28), 9)
    ctx = {"start": start.date()}
    make: Callable[[random.Random, str, dict[str, Any]], list[_Fact]]
    if language == "en":
        make, me = _facts_en, "my"
        friends = rng.sample(_EN["first"], 2)
    else:
        make, me = _facts_zh, "我"
        friends = rng.sample(_ZH["first"], 2)
    mine = make(rng, me, ctx)
    rng.shuffle(mine)
    others = [f for friend in friends for f in _about(make(rng, friend, ctx), friend)]
    rng.shuffle(others)

    # session dates: gaps of days to weeks, random times
    dates: list[dt.datetime] = []
    d = start
    for _ in range(n_sessions):
        d = d + dt.timedelta(days=rng.randint(2, 24), hours=rng.randint(0, 10))
        d = d.replace(minute=rng.randint(0, 59))
        dates.append(d)
    # Facts about the user land in the first ~60% of sessions; distractors anywhere;
    # corrections in a later session than the fact they correct.
    early = max(1, int(n_sessions * 0.6))
    plan: list[list[tuple[str, _Fact]]] = [[] for _ in range(n_sessions)]
    for f in mine:
        s = rng.randrange(early)
        plan[s].append(("state", f))
        if f.correction and rng.random() < 0.6 and s + 1 < n_sessions:
            plan[rng.randrange(s + 1, n_sessions)].append(("correct", f))
    for f in others:
        s = rng.randrange(n_sessions)
        plan[s].append(("state", f))

    per_session = max(6, target // n_sessions)
    msgs: list[Message] = []
    questions: list[Question] = []
    corrected: set[int] = set()
    stated_in: dict[int, int] = {}
    filler = _FILLER[language]
    real = _corpus_pairs(language) if real_filler else ()
    ack = _ACK[language]
    for s in range(n_sessions):
        stamp = _stamp(dates[s], language)
        session_date = _fmt_date(dates[s].date(), language)
        events = plan[s]
        rng.shuffle(events)
        slots = sorted(
            rng.sample(range(1, per_session // 2), min(len(events), per_session // 2 - 1))
        )
        event_at = dict(zip(slots, events))
        pairs = per_session // 2
        for t in range(pairs):
            if t == 0:
                user = rng.choice(_SESSION_OPEN[language]).format(stamp=stamp)
                reply = _reply(rng, language, 1, 2)
            elif t in event_at:
                what, f = event_at[t]
                if what == "correct" and f.correction:
                    user = rng.choice(f.correction)
                    corrected.add(id(f))
                else:
                    user = rng.choice(f.statements).replace("{session_date}", session_date)
                    if f.answer == "{session_date}":
                        f.answer = session_date
                stated_in[id(f)] = s
                reply = rng.choice(ack)
                if rng.random() < 0.5:
                    reply += " " + _reply(rng, language, 1, 2)
            else:
                stated = [f for f in mine if id(f) in stated_in and f.restate]
                roll = rng.random()
                reply = _reply(rng, language, 1, 3)
                if stated and roll < 0.12:
                    user = rng.choice(rng.choice(stated).restate)  # near-duplicate mention
                elif real and roll < 0.45:
                    user, reply = rng.choice(real)
                elif roll < (0.7 if language == "en" else 0.85):
                    user = _chat(rng, language)  # chit-chat with its own rare words
                else:
                    user = rng.choice(filler["user"])
            msgs.append({"role": "user", "content": user})
            msgs.append({"role": "assistant", "content": reply})

    for f in mine + others:
        if id(f) not in stated_in or f.answer == "{session_date}":
            continue
        if f in others and not f.question.count(friends[0]) and not f.question.count(friends[1]):
            continue  # a distractor whose question would be ambiguous with the user's own
        answer = f.corrected_answer if id(f) in corrected and f.corrected_answer else f.answer
        questions.append(
            Question(f.question, answer, answer_words(answer), f.kind, stated_in[id(f)])
        )
    return Dialog(
        seed=seed,
        language=language,
        messages=msgs,
        questions=questions,
        session_dates=[_stamp(x, language) for x in dates],
    )


def generate_dialogs(
    count: int, *, seed: int = 0, languages: Sequence[str] = ("en", "zh")
) -> list[Dialog]:
    """``count`` dialogs from consecutive seeds, alternating ``languages``."""
    return [generate_dialog(seed + k, language=languages[k % len(languages)]) for k in range(count)]
