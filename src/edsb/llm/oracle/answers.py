"""The oracle's answers: for every benchmark case, the event a careful human planner would narrate and the plan code
they would write on the location-constrained API, plus standing points for Direct Inference on the PI cases.

Written by hand from the instructions and the scenes (never from the cases' expected plans). The code asks the
scene instead of naming a seat outright wherever a planner would have to look: which chairs belong to a table, which
of them are occupied (`is_object_occupied` sees every character's latest plan, distractors included, so one answer
serves every distraction level), which table lies closer to something. Each character's handle is the lowercase
name; `Answer.misplaced` relies on it to build the negative control.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# A scene's seats grouped as the descriptions group them; planners read these areas off the scene description.
_OFFICE_CONFERENCE_CHAIRS = """\
    conference = []
    for table in ["table_4", "table_9", "table_10", "table_12"]:
        for chair in get_objects_close_to(table, "chair"):
            if chair not in conference:
                conference.append(chair)
"""


@dataclass(frozen=True)
class Answer:
    """One case's answers. `code` is the body of `parse_event` / `generate_next_plan`, ending with its return."""

    reasoning: str
    characters: tuple[str, ...]  # () = nobody acts yet: the Narrator proposes no event
    activity: str
    code: str
    decoy: str = ""  # an anchor that is wrong for this story (negative control)
    point: tuple[float, float] | None = None  # PI cases: where Direct Inference puts the character
    action: str = "idle"  # PI cases: the action Direct Inference sets
    wrong: Answer | None = None  # an explicit wrong answer where a wrong anchor cannot apply (waiting)

    def misplaced(self) -> Answer:
        """The negative control: the same answer, each character finally sent to the decoy anchor."""
        lines = self.code.rstrip("\n").split("\n")
        moves = [f'    {name.lower()}.set_position(get_area_adjacent_to("{self.decoy}"))' for name in self.characters]
        code = "\n".join([*lines[:-1], *moves, lines[-1]]) + "\n"
        point = None if self.point is None else (self.point[0] + 2.5, self.point[1] + 2.5)
        return replace(self, code=code, point=point)

    def direct_code(self) -> str:
        """Direct Inference: the same character and action, standing at a hand-picked free point of the area."""
        if self.point is None:
            raise ValueError(f"no Direct Inference point for the event {self.activity!r}")
        (name,) = self.characters
        handle = name.lower()
        return (
            f"    # {self.reasoning} A free spot inside that area, clear of the furniture:\n"
            f'    {handle} = get_character("{name}")\n'
            f"    {handle}.set_position([{self.point[0]}, {self.point[1]}])\n"
            f'    {handle}.set_target_action("{self.action}")\n'
            f"    return [{handle}]\n"
        )


def _seat_one(name: str, candidates: str, action: str, comment: str) -> str:
    """Code that sits `name` on the first free seat of the list expression `candidates`."""
    handle = name.lower()
    return f"""\
    # {comment}
    {handle} = get_character("{name}")
    for seat in {candidates}:
        if not is_object_occupied(seat):
            {handle}.set_position(get_area_to_sit_on(seat))
            break
    {handle}.set_target_action("{action}")
    return [{handle}]
"""


def _stand(name: str, area: str, action: str, comment: str) -> str:
    handle = name.lower()
    return f"""\
    # {comment}
    {handle} = get_character("{name}")
    {handle}.set_position({area})
    {handle}.set_target_action("{action}")
    return [{handle}]
"""


def _pi(name: str, area: str, action: str, activity: str, point: tuple[float, float], decoy: str) -> Answer:
    reason = f"{name} only has to {activity}."
    return Answer(reason, (name,), activity, _stand(name, area, action, reason), decoy, point, action)


ANSWERS: dict[int, Answer] = {
    # --- OA: find the object the instruction singles out ---------------------------------------------------------
    0: Answer(
        "Ryan texts beside the small table that stands between the two facing armchairs.",
        ("Ryan",),
        "text a friend on his phone next to the table between the armchairs",
        """\
    # The table the instruction means is the one both armchairs of the living room stand close to.
    table = [t for t in get_objects_close_to("chair_1", "table") if t in get_objects_close_to("chair_3", "table")][0]
    ryan = get_character("Ryan")
    ryan.set_position(get_area_close_to(table))
    ryan.set_target_action("use_smartphone")
    return [ryan]
""",
        decoy="dishwasher_1",
    ),
    1: Answer(
        "Chad needs a free desk chair in one of the rows next to the cabinets of the workspace.",
        ("Chad",),
        "work on a computer at a desk in the row by the cabinet",
        _seat_one(
            "Chad",
            'get_objects_close_to("cabinet_1", "chair")',
            "work_on_computer",
            "The chairs by the cabinet form the rows; take a free one.",
        ),
        decoy="tv_1",
    ),
    2: Answer(
        "Tyler eats at the dining table nearest potted_plant_2, on a free chair.",
        ("Tyler",),
        "have a meal at the table near the second potted plant",
        """\
    # The table nearest potted_plant_2, then a free chair that belongs to it.
    table = get_closest_object("potted_plant_2", "table")
    tyler = get_character("Tyler")
    for seat in get_objects_associated_with(table, "chair"):
        if not is_object_occupied(seat):
            tyler.set_position(get_area_to_sit_on(seat))
            break
    tyler.set_target_action("eat")
    return [tyler]
""",
        decoy="chair_6",
    ),
    3: Answer(
        "David dines at chair_3's table but chair_3 is broken, so he takes another chair there.",
        ("David",),
        "eat dinner at the table of the broken chair, on another chair",
        """\
    # chair_3 is broken: any other free chair of its table.
    table = get_closest_object("chair_3", "table")
    david = get_character("David")
    for seat in get_objects_associated_with(table, "chair"):
        if seat != "chair_3" and not is_object_occupied(seat):
            david.set_position(get_area_to_sit_on(seat))
            break
    david.set_target_action("eat")
    return [david]
""",
        decoy="chair_6",
    ),
    4: Answer(
        "David stands by the table that carries the record player.",
        ("David",),
        "stand near the table holding the record player",
        _stand(
            "David",
            'get_area_close_to(get_object_supporting("record_player_1"))',
            "idle",
            "The record player rests on a table: stand near that table.",
        ),
        decoy="dishwasher_1",
    ),
    # --- RC: the region meant --------------------------------------------------------------------------------------
    10: Answer(
        "Kenneth texts in the gap between the two living-room chairs.",
        ("Kenneth",),
        "send a text message between the living-room chairs",
        _stand(
            "Kenneth",
            'get_area_between("chair_1", "chair_3")',
            "use_smartphone",
            "chair_1 and chair_3 are the living room's chairs.",
        ),
        decoy="dishwasher_1",
    ),
    11: Answer(
        "Jesse opens the cabinet of the lounge, the one next to the water dispenser.",
        ("Jesse",),
        "open the cabinet in the lounge",
        """\
    # The lounge's cabinet is the one by the water dispenser.
    cabinet = get_closest_object("water_dispenser_1", "cabinet")
    jesse = get_character("Jesse")
    jesse.set_position(get_area_to_interact_with(cabinet))
    jesse.set_target_action("open_cabinet")
    return [jesse]
""",
        decoy="tv_1",
    ),
    12: Answer(
        "John sits at one of the dining tables and orders his dinner.",
        ("John",),
        "order dinner seated in the dining area",
        _seat_one(
            "John",
            'get_objects_associated_with("table_1", "chair") + get_objects_associated_with("table_4", "chair")',
            "order_food",
            "The dining area has two tables; any free chair at either.",
        ),
        decoy="chair_6",
    ),
    13: Answer(
        "David eats his sandwich on a free chair of the kitchen table.",
        ("David",),
        "eat a sandwich at the kitchen table",
        _seat_one("David", 'get_objects_associated_with("table_4", "chair")', "eat", "table_4 is the kitchen's table."),
        decoy="dishwasher_1",
    ),
    14: Answer(
        "Brian takes a free chair in the conference area.",
        ("Brian",),
        "take a seat in the conference area",
        _OFFICE_CONFERENCE_CHAIRS
        + _seat_one("Brian", "conference", "idle", "Any free chair around the conference tables."),
        decoy="tv_1",
    ),
    # --- SS: story state -----------------------------------------------------------------------------------------
    20: Answer(
        "Melissa has chair_4 and Randall chair_1, so Taylor reads on a chair that is still empty.",
        ("Taylor",),
        "read a book on an empty chair",
        _seat_one(
            "Taylor",
            '["chair_1", "chair_2", "chair_3", "chair_4"]',
            "read_book",
            "Only the four named chairs; skip the taken ones.",
        ),
        decoy="dishwasher_1",
    ),
    21: Answer(
        "Melissa is still using the only coffee maker, so Christopher must wait before he can make his coffee.",
        (),
        "",
        "    # Melissa is still using the coffee maker: nothing to do yet.\n    return []\n",
        wrong=Answer(
            "Christopher makes his coffee now.",
            ("Christopher",),
            "make a coffee with the coffee maker right away",
            _stand(
                "Christopher",
                'get_area_to_interact_with("coffee_maker_1")',
                "use_coffee_maker",
                "Ignore that someone is using it.",
            ),
        ),
    ),
    22: Answer(
        "Brenda already opened cabinet_3, so Tyler can take his drink out straight away.",
        ("Tyler",),
        "take a drink out of the open cabinet_3",
        _stand(
            "Tyler",
            'get_area_to_interact_with("cabinet_3")',
            "take_out_drink",
            "cabinet_3 is open already (Brenda opened it).",
        ),
        decoy="tv_1",
    ),
    23: Answer(
        "Tiffany wrote on the white board, so Tim cleans it before he returns to his desk.",
        ("Tim",),
        "clean the white board Tiffany wrote on",
        _stand(
            "Tim",
            'get_area_to_interact_with("white_board_1")',
            "clean_white_board",
            "The board was written on, so it needs cleaning first.",
        ),
        decoy="tv_1",
    ),
    24: Answer(
        "Sara is drinking at the standing table_2; Michael joins her there with a beer.",
        ("Michael",),
        "join Sara at her standing table for a beer",
        _stand("Michael", 'get_area_close_to("table_2")', "drink", "Sara stands at table_2."),
        decoy="chair_6",
    ),
    # --- OA + RC -------------------------------------------------------------------------------------------------
    30: Answer(
        "The two living-room seats nearest the plant are covered in clutter; Joshua reads on the remaining one.",
        ("Joshua",),
        "read a book on the free living-room seat",
        """\
    # Of the living room's seats, the one farthest from the plant is the one not cluttered.
    seats = ["couch_1", "chair_1", "chair_3"]
    best = seats[0]
    for seat in seats:
        if get_distance_between(seat, "potted_plant_2") > get_distance_between(best, "potted_plant_2"):
            best = seat
    joshua = get_character("Joshua")
    joshua.set_position(get_area_to_sit_on(best))
    joshua.set_target_action("read_book")
    return [joshua]
""",
        decoy="dishwasher_1",
    ),
    31: Answer(
        "Adam eats at the dining table farther from the reception desk.",
        ("Adam",),
        "have a meal at the dining table away from the reception desk",
        """\
    # Two dining tables: keep the one farther from the reception desk.
    table = "table_1"
    if get_distance_between("table_4", "reception_desk_1") > get_distance_between("table_1", "reception_desk_1"):
        table = "table_4"
    adam = get_character("Adam")
    for seat in get_objects_associated_with(table, "chair"):
        if not is_object_occupied(seat):
            adam.set_position(get_area_to_sit_on(seat))
            break
    adam.set_target_action("eat")
    return [adam]
""",
        decoy="chair_6",
    ),
    32: Answer(
        "Billy eats at the dining table next to the potted plant of the dining area.",
        ("Billy",),
        "have a meal at the dining table by the potted plant",
        """\
    # The dining area's plant is potted_plant_2; its nearest table, then a free chair of that table.
    table = get_closest_object("potted_plant_2", "table")
    billy = get_character("Billy")
    for seat in get_objects_associated_with(table, "chair"):
        if not is_object_occupied(seat):
            billy.set_position(get_area_to_sit_on(seat))
            break
    billy.set_target_action("eat")
    return [billy]
""",
        decoy="chair_6",
    ),
    33: Answer(
        "Kelly sits in the conference row away from the white board, the one by table_10 and table_12.",
        ("Kelly",),
        "attend the meeting from the row far from the whiteboard",
        """\
    # table_4 and table_9 stand by the white board; the far row sits at table_10 and table_12.
    near = get_objects_close_to("table_4", "chair") + get_objects_close_to("table_9", "chair")
    kelly = get_character("Kelly")
    for seat in get_objects_close_to("table_10", "chair") + get_objects_close_to("table_12", "chair"):
        if seat not in near and not is_object_occupied(seat):
            kelly.set_position(get_area_to_sit_on(seat))
            break
    kelly.set_target_action("attend_meeting")
    return [kelly]
""",
        decoy="tv_1",
    ),
    34: Answer(
        "Joseph eats on one of the two end chairs of the kitchen table.",
        ("Joseph",),
        "eat on an end chair of the kitchen table",
        """\
    # The end chairs are the two kitchen chairs farthest apart.
    chairs = get_objects_associated_with("table_4", "chair")
    ends = [chairs[0], chairs[1]]
    for a in chairs:
        for b in chairs:
            if get_distance_between(a, b) > get_distance_between(ends[0], ends[1]):
                ends = [a, b]
    joseph = get_character("Joseph")
    for seat in ends:
        if not is_object_occupied(seat):
            joseph.set_position(get_area_to_sit_on(seat))
            break
    joseph.set_target_action("eat")
    return [joseph]
""",
        decoy="dishwasher_1",
    ),
    # --- OA + SS -------------------------------------------------------------------------------------------------
    40: Answer(
        "Sherry sits on chair_6; Jimmy eats on a free chair to her right.",
        ("Jimmy",),
        "eat a sandwich on a chair to Sherry's right",
        _seat_one("Jimmy", 'get_objects_right_of("chair_6", "chair")', "eat", "Sherry is on chair_6."),
        decoy="dishwasher_1",
    ),
    41: Answer(
        "Crystal is back at chair_6; James works in the seat right beside her.",
        ("James",),
        "work on the computer in the seat beside Crystal",
        _seat_one(
            "James",
            '[get_closest_object("chair_6", "chair")]',
            "work_on_computer",
            "Crystal sits on chair_6; the next seat is the chair closest to it.",
        ),
        decoy="tv_1",
    ),
    42: Answer(
        "Allison sits on chair_16; Mark joins the meeting on a chair to her right.",
        ("Mark",),
        "join the meeting on a chair to Allison's right",
        _seat_one("Mark", 'get_objects_right_of("chair_16", "chair")', "attend_meeting", "Allison is on chair_16."),
        decoy="tv_1",
    ),
    43: Answer(
        "Melissa eats on chair_3; Andrew sits at her table to eat with her.",
        ("Andrew",),
        "join Melissa at her table for a meal",
        _seat_one(
            "Andrew",
            'get_objects_associated_with(get_closest_object("chair_3", "table"), "chair")',
            "eat",
            "Melissa is on chair_3: a free chair at the same table.",
        ),
        decoy="chair_6",
    ),
    44: Answer(
        "Scott eats at table_1; Jason takes its free chair nearest the potted plant and Kimberly another one.",
        ("Jason", "Kimberly"),
        "join Scott at his table for a meal",
        """\
    # Scott is at table_1. Free chairs there; Jason gets the one nearest the plant.
    free = [c for c in get_objects_associated_with("table_1", "chair") if not is_object_occupied(c)]
    nearest = free[0]
    for seat in free:
        if get_distance_between(seat, "potted_plant_2") < get_distance_between(nearest, "potted_plant_2"):
            nearest = seat
    other = [c for c in free if c != nearest][0]
    jason = get_character("Jason")
    jason.set_position(get_area_to_sit_on(nearest))
    jason.set_target_action("eat")
    kimberly = get_character("Kimberly")
    kimberly.set_position(get_area_to_sit_on(other))
    kimberly.set_target_action("eat")
    return [jason, kimberly]
""",
        decoy="chair_6",
    ),
    # --- RC + SS -------------------------------------------------------------------------------------------------
    50: Answer(
        "Deborah and Mark already sit at the kitchen table; Jonathan uses his laptop on a chair that is still free.",
        ("Jonathan",),
        "work on his laptop on a free kitchen chair",
        _seat_one(
            "Jonathan",
            'get_objects_associated_with("table_4", "chair")',
            "use_laptop",
            "Kitchen chairs are those of table_4.",
        ),
        decoy="dishwasher_1",
    ),
    51: Answer(
        "David has made his coffee; Kathryn and Christopher hold the couch and chair_1, so he reads on the other seat.",
        ("David",),
        "read a book on a free living-room seat",
        _seat_one("David", '["couch_1", "chair_1", "chair_3"]', "read_book", "The living room's seats."),
        decoy="dishwasher_1",
    ),
    52: Answer(
        "William joins the meeting on one of the conference chairs nobody has taken.",
        ("William",),
        "join the meeting in the conference room",
        _OFFICE_CONFERENCE_CHAIRS
        + _seat_one("William", "conference", "attend_meeting", "Skip the chairs the attendees already use."),
        decoy="tv_1",
    ),
    53: Answer(
        "Luis and Stefanie need a dining table with two free chairs.",
        ("Luis", "Stefanie"),
        "share a meal at a free dining table",
        """\
    # A dining table with two free chairs (table_1 is partly taken).
    for table in ["table_1", "table_4"]:
        free = [c for c in get_objects_associated_with(table, "chair") if not is_object_occupied(c)]
        if len(free) >= 2:
            break
    luis = get_character("Luis")
    luis.set_position(get_area_to_sit_on(free[0]))
    luis.set_target_action("eat")
    stefanie = get_character("Stefanie")
    stefanie.set_position(get_area_to_sit_on(free[1]))
    stefanie.set_target_action("eat")
    return [luis, stefanie]
""",
        decoy="chair_6",
    ),
    54: Answer(
        "Justin and Karen hold two bar chairs; Thomas and Brenda sit on the two empty ones.",
        ("Thomas", "Brenda"),
        "enjoy drinks on the empty bar chairs",
        """\
    # The bar chairs stand at the counter; keep the empty ones.
    free = [c for c in get_objects_close_to("bar_counter_1", "chair") if not is_object_occupied(c)]
    thomas = get_character("Thomas")
    thomas.set_position(get_area_to_sit_on(free[0]))
    thomas.set_target_action("drink")
    brenda = get_character("Brenda")
    brenda.set_position(get_area_to_sit_on(free[1]))
    brenda.set_target_action("drink")
    return [thomas, brenda]
""",
        decoy="chair_6",
    ),
    # --- PI: a scored standing point -----------------------------------------------------------------------------
    # Direct Inference points: inside the area the code asks for and off every floor object (picked among points the
    # position sampler finds there, checked with edsb's judge), rounded to 10 cm as a planner would write them.
    60: _pi(
        "Theodore",
        'get_area_in_front_of("fridge_1")',
        "idle",
        "stand in front of the fridge",
        (4.3, 1.8),
        "dishwasher_1",
    ),
    61: _pi(
        "Franklin",
        'get_area_to_interact_with("coffee_maker_1")',
        "use_coffee_maker",
        "make coffee with the coffee maker",
        (2.6, 1.0),
        "potted_plant_1",
    ),
    62: _pi(
        "Benjamin",
        'get_area_to_interact_with("record_player_1")',
        "turn_on_record_player",
        "switch on the record player",
        (4.0, 7.5),
        "dishwasher_1",
    ),
    63: _pi(
        "Douglas",
        'get_intersected_area(get_area_in_front_of("couch_1"), get_area_in_front_of("couch_3"))',
        "idle",
        "stand where couch_1 and couch_3 face each other",
        (2.2, 3.3),
        "tv_1",
    ),
    64: _pi(
        "Scott",
        'get_area_left_of("water_dispenser_1")',
        "idle",
        "stand to the left of the water dispenser",
        (0.3, 5.7),
        "tv_1",
    ),
    65: _pi("Jerry", 'get_area_right_of("cabinet_2")', "idle", "stand to the right of cabinet_2", (3.9, 12.6), "tv_1"),
    66: _pi(
        "Jacob",
        'get_area_left_of("bar_counter_1")',
        "idle",
        "stand to the left of the bar counter",
        (4.8, 7.7),
        "chair_6",
    ),
    67: _pi(
        "Robert",
        'get_area_behind("reception_desk_1")',
        "idle",
        "stand behind the reception desk",
        (3.3, 1.8),
        "chair_6",
    ),
    68: _pi("Robert", 'get_area_adjacent_to("table_5")', "idle", "stand right next to table_5", (5.5, 7.1), "chair_6"),
    69: _pi("Charles", 'get_area_behind("chair_1")', "idle", "stand behind chair_1", (2.7, 5.2), "dishwasher_1"),
}
