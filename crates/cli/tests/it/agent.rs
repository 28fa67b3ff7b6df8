//! The agent loop on a real index: rounds, repeated keyword sets, the turn cap, the answer-only
//! turn, citation checks, and the trace it leaves.

use crate::common::*;
use ragtrail::Engine;
use ragtrail::OfflinePlanner;
use ragtrail::trace::{self, EventBody, RunStatus};
use ragtrail::{
    AgentRagOptions, Observation, Planner, PlannerAction, PlannerContext, PlannerError,
    PlannerStep, ProposedCitation,
};

const CLAIMS: &str = "---\ntitle: 报销流程\n---\n\n## 提交时限\n\n出差结束后30天内在「易报」提交报销单。火车票的凭证要求见《铁路客票规定》。\n";
const RAIL: &str = "---\ntitle: 铁路客票规定\n---\n\n## 电子发票\n\n高铁车费只认12306开具的电子发票，购票截图无效。\n\n## 开票期限\n\n乘车后180天内申请开具。\n";

fn workspace() -> (Workspace, Engine) {
    let ws = Workspace::new();
    ws.write("finance/claims.md", CLAIMS);
    ws.write("finance/rail.md", RAIL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    (ws, engine)
}

/// One scripted turn: sees the context and the observations it was handed.
type Turn = Box<dyn FnMut(&PlannerContext<'_>, &[Observation]) -> Vec<PlannerAction>>;

/// A planner that plays back a script.
struct Scripted {
    turns: Vec<Turn>,
    seen: Vec<Vec<Observation>>,
}

impl Planner for Scripted {
    fn kind(&self) -> &'static str {
        "scripted"
    }
    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        obs: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        self.seen.push(obs.to_vec());
        let actions = if self.turns.is_empty() {
            Vec::new()
        } else {
            (self.turns.remove(0))(ctx, obs)
        };
        Ok(PlannerStep {
            actions,
            ..PlannerStep::default()
        })
    }
}

fn search(keywords: &[&str]) -> PlannerAction {
    PlannerAction::Search {
        query: None,
        keywords: keywords.iter().map(|s| s.to_string()).collect(),
        reason: "test".into(),
        top_k: None,
        lexical: false,
    }
}

fn first_hit(obs: &[Observation]) -> Option<(String, String)> {
    obs.iter().find_map(|o| match o {
        Observation::Hits { hits, .. } => hits
            .first()
            .map(|h| (h.chunk_id.clone(), h.snippet.clone())),
        _ => None,
    })
}

/// Ingests `docs` (path, text) into a fresh workspace and asks `question` with the offline
/// planner.
fn offline_run_on(docs: &[(&str, &str)], question: &str) -> ragtrail::AgentOutcome {
    let ws = Workspace::new();
    for (path, text) in docs {
        ws.write(path, text);
    }
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    ws.ask(&engine, &mut OfflinePlanner::new(), question)
}

/// The titlePaths an answered run cites, in order.
fn cited_titles(outcome: ragtrail::AgentOutcome) -> Vec<String> {
    assert_eq!(outcome.status, RunStatus::Answered, "{:?}", outcome.message);
    outcome
        .answer
        .expect("answer")
        .citations
        .iter()
        .map(|c| c.title_path.clone())
        .collect()
}

#[test]
fn a_name_in_a_sentence_sharing_no_question_word_is_not_followed() {
    let outcome = offline_run_on(
        &[
            (
                "facilities/parking.md",
                "# Parking\n\n## Permits\n\nA staff parking permit costs 20 euros per month. \
                 Questions go to the Facilities Desk on weekdays.\n",
            ),
            (
                "facilities/desk.md",
                "# Facilities Desk\n\nThe Facilities Desk is on the ground floor.\n",
            ),
        ],
        "How much does a parking permit cost?",
    );
    assert!(
        outcome
            .rounds
            .iter()
            .all(|r| !r.keywords.iter().any(|k| k == "Facilities Desk")),
        "{:?}",
        outcome
            .rounds
            .iter()
            .map(|r| &r.keywords)
            .collect::<Vec<_>>()
    );
    assert_eq!(cited_titles(outcome), ["Parking / Permits"]);
}

#[test]
fn round_one_searches_every_content_word_the_keyword_limit_allows() {
    // Six rare words each name their own document; the two commoner words (in two chunks
    // each) meet only in the section that answers. Searching just the six rarest would leave
    // that section out of round 1.
    let mut docs: Vec<(String, String)> = [
        "visitors",
        "contractors",
        "interns",
        "auditors",
        "drivers",
        "couriers",
    ]
    .iter()
    .map(|group| {
        (
            format!("people/{group}.md"),
            format!(
                "# {group}\n\nRules for {group} are kept by the front office, which opens at \
                 nine and closes at five. Its forms are on the intranet, and questions go to \
                 the office manager by email.\n"
            ),
        )
    })
    .collect();
    docs.push((
        "facilities/parking.md".into(),
        "# Parking\n\n## Permits\n\nA parking permit is issued by Facilities for 20 euros a month.\n"
            .into(),
    ));
    docs.push((
        "facilities/garage.md".into(),
        "# Garage\n\nThe garage has parking on two levels.\n".into(),
    ));
    docs.push((
        "facilities/badges.md".into(),
        "# Badges\n\nA badge is the permit to enter the building.\n".into(),
    ));
    let docs: Vec<(&str, &str)> = docs.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let outcome = offline_run_on(
        &docs,
        "Do visitors, contractors, interns, auditors, drivers and couriers need a parking permit?",
    );
    let first = &outcome.rounds[0];
    assert_eq!(first.keywords.len(), 8, "{:?}", first.keywords);
    assert!(
        first
            .hits
            .iter()
            .any(|h| h.title_path == "Parking / Permits"),
        "{:?} -> {:?}",
        first.keywords,
        first.hits.iter().map(|h| &h.title_path).collect::<Vec<_>>()
    );
}

#[test]
fn a_name_in_a_sentence_about_the_chunks_subject_is_followed() {
    // The bridge sentence says "He", not the name in the question; the chunk's title is that
    // name, so the sentence is about the question's subject and its name is worth a search.
    let outcome = offline_run_on(
        &[
            (
                "people/warrier.md",
                "# Sachin Warrier\n\nSachin Warrier is a playback singer. \
                 He was employed by Tata Consultancy Services before music.\n",
            ),
            (
                "companies/tcs.md",
                "# Tata Consultancy Services\n\nIts head office is in Mumbai.\n",
            ),
            (
                "companies/infosys.md",
                "# Infosys\n\nInfosys is a company headquartered in Bangalore.\n",
            ),
            (
                "companies/wipro.md",
                "# Wipro\n\nWipro is a company headquartered in Bangalore, where it was founded.\n",
            ),
        ],
        "Where is the company that Sachin Warrier worked for headquartered?",
    );
    let searched: Vec<&Vec<String>> = outcome.rounds.iter().map(|r| &r.keywords).collect();
    assert!(
        searched.iter().skip(1).any(|keywords| keywords
            .first()
            .is_some_and(|k| k == "Tata Consultancy Services")),
        "{searched:?}"
    );
}

#[test]
fn several_names_from_the_best_hits_are_searched_together() {
    // The bridge (McLean) is the second name of its sentence; counties that match the
    // question's other words crowd it out of round 1 and would crowd it out of a search for
    // General Growth Properties alone.
    let mut docs: Vec<(String, String)> = [
        "Arlington",
        "Loudoun",
        "Prince William",
        "Fauquier",
        "Stafford",
    ]
    .iter()
    .map(|county| {
        (
            format!("places/{county}.md"),
            format!(
                "# {county} County\n\n{county} County is located in the north. \
                 Its county seat is located in its largest town.\n"
            ),
        )
    })
    .collect();
    docs.push((
        "malls/tysons.md".into(),
        "# Tysons Galleria\n\nTysons Galleria, owned by General Growth Properties, is a shopping \
         mall in McLean.\n"
            .into(),
    ));
    docs.push((
        "places/mclean.md".into(),
        "# McLean\n\nMcLean is an unincorporated community in Fairfax County.\n".into(),
    ));
    docs.push((
        "companies/ggp.md".into(),
        "# General Growth Properties\n\nGeneral Growth Properties is a real estate company \
         based in Chicago.\n"
            .into(),
    ));
    let docs: Vec<(&str, &str)> = docs.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let outcome = offline_run_on(&docs, "Tysons Galleria is located in what county?");
    let rounds: Vec<(&Vec<String>, Vec<&str>)> = outcome
        .rounds
        .iter()
        .map(|r| {
            (
                &r.keywords,
                r.hits.iter().map(|h| h.title_path.as_str()).collect(),
            )
        })
        .collect();
    assert!(!rounds[0].1.contains(&"McLean"), "{rounds:?}");
    let second = rounds.get(1).expect("a second round");
    assert!(
        second.0.iter().any(|k| k == "General Growth Properties"),
        "{rounds:?}"
    );
    assert!(second.0.iter().any(|k| k == "McLean"), "{rounds:?}");
    assert!(second.1.contains(&"McLean"), "{rounds:?}");
    assert_eq!(
        outcome.rounds[1].reason,
        "follow the names General Growth Properties, McLean in Tysons Galleria"
    );
}

#[test]
fn a_reference_in_a_sentence_sharing_no_question_word_is_not_followed() {
    let outcome = offline_run_on(
        &[
            (
                "facilities/parking.md",
                "# Parking\n\n## Permits\n\nA staff parking permit costs 20 euros per month. \
                 Lockers are assigned under the \"Locker Rules\".\n",
            ),
            (
                "facilities/lockers.md",
                "# Locker Rules\n\nLockers are assigned by the front office.\n",
            ),
        ],
        "How much does a parking permit cost?",
    );
    let searched: Vec<&Vec<String>> = outcome.rounds.iter().map(|r| &r.keywords).collect();
    assert!(
        searched
            .iter()
            .all(|keywords| !keywords.iter().any(|k| k == "Locker Rules")),
        "{searched:?}"
    );
    assert_eq!(cited_titles(outcome), ["Parking / Permits"]);
}

#[test]
fn single_characters_are_searched_when_every_longer_word_is_unknown() {
    // 东西 is in no chunk, so it retrieves nothing; 坏 and 换 still can.
    let outcome = offline_run_on(
        &[
            (
                "shop/after-sales.md",
                "# 售后服务\n\n## 换货\n\n商品坏了可以换，也可以退。\n",
            ),
            (
                "travel/hotel.md",
                "# 差旅\n\n## 住宿\n\n出差住宿按标准报销。\n",
            ),
        ],
        "东西坏了能换吗？",
    );
    let first = &outcome.rounds[0];
    assert!(
        first.keywords.iter().any(|k| k == "换"),
        "{:?}",
        first.keywords
    );
    assert_eq!(
        first.hits.first().map(|h| h.title_path.as_str()),
        Some("售后服务 / 换货"),
        "{:?}",
        first.keywords
    );
}

/// A travel rule that covers 出差, 期间, 酒店, 费用 and 报销 of [`LAUNDRY_QUESTION`], enough by the
/// coverage bar alone, but never names 洗衣服, which the question is about.
const TRAVEL_RULE: (&str, &str) = (
    "finance/travel.md",
    "# 差旅费用报销制度\n\n## 不予报销的项目\n\n出差期间以下费用不予报销：酒店迷你吧和付费电视、\
     个人旅游期间的费用。\n",
);
const LAUNDRY_QUESTION: &str = "出差期间酒店洗衣服的费用能报销吗？";

/// The refusal message of a run that must end in "insufficient evidence" because no chunk it
/// may see mentions 洗衣服.
fn refused_for_laundry(outcome: ragtrail::AgentOutcome) -> String {
    let message = no_evidence_message(outcome);
    assert!(
        message.contains("原因：知识库中没有段落提到“洗衣服”。"),
        "{message}"
    );
    message
}

#[test]
fn a_question_about_a_thing_no_chunk_mentions_is_refused_and_says_so() {
    let message = refused_for_laundry(offline_run_on(&[TRAVEL_RULE], LAUNDRY_QUESTION));
    // The coverage bar was met; quoting it would read as a pass.
    assert!(!message.contains("bar "), "{message}");
}

#[test]
fn whether_a_thing_is_mentioned_is_judged_within_the_callers_tenant() {
    // Another tenant's document names 洗衣服. The default tenant's question is refused exactly
    // as if that document did not exist, so the refusal says nothing about it.
    let globex = (
        "globex/laundry.md",
        "---\ntenant: globex\n---\n# 洗衣费\n\n出差超过七天的，酒店洗衣服的费用可以报销。\n",
    );
    let message = refused_for_laundry(offline_run_on(&[TRAVEL_RULE, globex], LAUNDRY_QUESTION));
    assert!(!message.contains("七天"), "{message}");
}

#[test]
fn insufficient_evidence_says_which_question_words_no_hit_holds() {
    let outcome = offline_run_on(
        &[(
            "facilities/parking.md",
            "# Parking\n\n## Permits\n\nA staff parking permit costs 20 euros per month.\n",
        )],
        "Can astronauts get a parking permit for their rocket?",
    );
    // The offline planner adds its account after a colon.
    assert!(
        outcome.reason.starts_with("no_relevant_hits: "),
        "{}",
        outcome.reason
    );
    let message = no_evidence_message(outcome);
    // The planner's account of the whole run, naming what the knowledge base lacks in the
    // asker's words: never a stem, never a coverage figure (the trace keeps those).
    assert!(message.contains("Why: "), "{message}");
    assert!(
        message.contains("no passage in English mentions"),
        "{message}"
    );
    assert!(message.contains("“astronauts”"), "{message}");
    for internal in ["not found in any hit", "%", "bar ", "Last search"] {
        assert!(!message.contains(internal), "{internal}: {message}");
    }
}

#[test]
fn a_refusal_names_the_askers_everyday_word_not_the_written_one_searched_for_it() {
    // 老板 ("boss") is searched as the documents' 上级; no passage holds 上级 with 至少, and the
    // reason says so in the asker's word.
    let outcome = offline_run_on(
        &[
            (
                "law.md",
                "---\ntitle: 劳动法摘要\n---\n\n## 工资支付\n\n工资应当以货币形式按月支付给劳动者\
                 本人，不得克扣或者无故拖欠劳动者的工资。\n\n## 延长工作时间\n\n安排劳动者延长工作\
                 时间的，支付不低于工资的百分之一百五十的工资报酬。\n\n## 仲裁时效\n\n劳动争议申请\
                 仲裁的时效期间为一年。\n\n## 休息日\n\n用人单位应当保证劳动者每周至少休息一日。\n\n\
                 ## 职业培训\n\n用人单位应当建立职业培训制度。\n",
            ),
            (
                "office.md",
                "---\ntitle: 办公守则\n---\n\n## 请假\n\n请假须经直属上级批准，并在系统中登记。\n",
            ),
        ],
        "下了班老板还让留下来干活，这钱至少该按平时的几成给？",
    );
    assert_eq!(
        outcome.rounds[0].keywords[0], "上级",
        "{:?}",
        outcome.rounds
    );
    let message = no_evidence_message(outcome);
    assert!(
        message.contains("原因：找到的段落中没有一段同时讲到“老板”、“至少”。"),
        "{message}"
    );
}

#[test]
fn a_sentence_that_answers_outweighs_terms_scattered_over_a_chunk() {
    let mut docs: Vec<(String, String)> = vec![(
        "hr/leave.md".into(),
        "# Leave Rules\n\n## Entitlements\n\nFathers get 15 days of paternity leave.\n\n\
             ## Family Events\n\nA birth in the family must be reported. Paternity questions \
             go to HR. Fathers may also take unpaid leave. Public holidays do not count as days \
             off.\n"
            .into(),
    )];
    // Unrelated documents, so that the key terms weigh alike.
    for (i, topic) in [
        "parking", "printers", "canteen", "lockers", "badges", "laptops",
    ]
    .iter()
    .enumerate()
    {
        docs.push((
            format!("misc/{topic}.md"),
            format!("# {topic}\n\nRules about {topic} number {i} apply on site.\n"),
        ));
    }
    let docs: Vec<(&str, &str)> = docs.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let outcome = offline_run_on(
        &docs,
        "How many days of paternity leave do fathers get after a birth?",
    );
    let cited = cited_titles(outcome);
    // "Family Events" holds every key term, one or two a sentence; "Entitlements" says it in one.
    assert_eq!(
        cited.first().map(String::as_str),
        Some("Leave Rules / Entitlements"),
        "{cited:?}"
    );
}

#[test]
fn a_reference_named_only_by_an_uncited_chunk_is_not_cited() {
    let outcome = offline_run_on(
        &[
            (
                "finance/insurance.md",
                "---\ntitle: 乘车保险规定\n---\n\n## 乘意险\n\n购票时附加的乘意险不予报销，公司已统一投保团体意外险。\n",
            ),
            (
                "admin/company.md",
                "---\ntitle: 公司概况\n---\n\n## 公司信息\n\n公司的信息安全要求见《终端安全规范》。\n",
            ),
            (
                "it/endpoint.md",
                "---\ntitle: 终端安全规范\n---\n\n## 密码\n\n登录密码至少12位，每90天更换一次。\n",
            ),
        ],
        "乘意险公司给报吗？",
    );
    assert!(
        outcome
            .rounds
            .iter()
            .any(|r| r.keywords.first().map(String::as_str) == Some("终端安全规范")),
        "a later round follows the reference the company chunk names: {:?}",
        outcome.rounds
    );
    assert_eq!(
        cited_titles(outcome),
        ["乘车保险规定 / 乘意险"],
        "only the chunk that answers"
    );
}

#[test]
fn searched_by_words_alone_the_best_hits_headings_are_searched_next() {
    // The hashing embedder reads words only: the headings of the best hits (新入职员工) are
    // the knowledge base's own words for what the asker put otherwise (年中才入职).
    let outcome = offline_run_on(
        &[(
            "hr/leave.md",
            "---\ntitle: 年休假管理办法\n---\n\n## 年假天数\n\n### 新入职员工\n\n\
             当年入职的员工，年假按入职后剩余日历天数折算，不足1整天的部分不计。\n\n\
             ### 法定年假\n\n工作满1年不满10年的，年休假5天。\n\n## 申请与审批\n\n\
             年假须提前3个工作日在系统中申请，由直属上级审批。\n",
        )],
        "年中才入职，今年的年假怎么算？",
    );
    let keywords: Vec<&Vec<String>> = outcome.rounds.iter().map(|r| &r.keywords).collect();
    assert_eq!(keywords[0], &["入职", "年假", "今年"], "{keywords:?}");
    assert!(
        keywords.len() >= 2 && keywords[1].iter().any(|k| k == "新入职员工"),
        "{keywords:?}"
    );
    assert!(
        outcome.rounds[1].reason.contains("新入职员工"),
        "{:?}",
        outcome.rounds[1].reason
    );
}

#[test]
fn offline_planner_follows_a_reference_from_round_one_into_round_two() {
    let (ws, engine) = workspace();
    let mut planner = OfflinePlanner::new();
    let outcome = ws.ask(&engine, &mut planner, "报销火车票需要什么凭证？");
    assert!(outcome.rounds.len() >= 2, "{:?}", outcome.rounds);
    assert_eq!(outcome.rounds[0].hits[0].title_path, "报销流程 / 提交时限");
    assert!(
        outcome.rounds[0]
            .hits
            .iter()
            .all(|h| !h.title_path.starts_with("铁路客票规定"))
    );
    assert_eq!(
        outcome.rounds[1].keywords[0], "铁路客票规定",
        "round 2 follows the document round 1 named"
    );
    assert!(
        outcome.rounds[1]
            .hits
            .iter()
            .any(|h| h.title_path == "铁路客票规定 / 电子发票")
    );
    assert_eq!(outcome.status, RunStatus::Answered, "{:?}", outcome.message);
    let answer = outcome.answer.expect("answer");
    let cited: Vec<&str> = answer
        .citations
        .iter()
        .map(|c| c.title_path.as_str())
        .collect();
    // The answer quotes the rule the reference led to, not the sentence that only points at
    // it ("见《铁路客票规定》" states nothing itself). Which of that rule's sections is meant
    // (电子发票 for 凭证) no shared word tells: either is quoted from the followed rule.
    assert!(
        !cited.is_empty() && cited.iter().all(|t| t.starts_with("铁路客票规定 / ")),
        "{cited:?}"
    );
    for c in &answer.citations {
        let chunk = engine.store().get(&c.chunk_id).expect("cited chunk exists");
        assert!(
            ragtrail::internals::quote_in_text(&c.quote, &chunk.text),
            "quote {:?} not in {}",
            c.quote,
            c.chunk_id
        );
    }
}

#[test]
fn unanswerable_question_is_insufficient_evidence_listing_the_keywords() {
    let (ws, engine) = workspace();
    let mut planner = OfflinePlanner::new();
    let outcome = ws.ask(&engine, &mut planner, "公司的健身房会员费可以报销吗？");
    assert_eq!(outcome.status, RunStatus::InsufficientEvidence);
    let message = outcome.message.expect("message");
    assert!(message.contains("已尝试的词："), "{message}");
    assert!(
        outcome
            .keyword_sets_tried
            .iter()
            .flatten()
            .any(|k| k.contains("健身")),
        "{:?}",
        outcome.keyword_sets_tried
    );
}

#[test]
fn a_repeated_keyword_set_is_not_searched_again_and_the_planner_is_told() {
    let (ws, engine) = workspace();
    let mut planner = Scripted {
        turns: vec![
            Box::new(|_, _| vec![search(&["高铁", "凭证"])]),
            Box::new(|_, _| vec![search(&["凭证 ", "高铁"])]),
            Box::new(|_, _| {
                vec![PlannerAction::GiveUp {
                    reason: "done".into(),
                }]
            }),
        ],
        seen: Vec::new(),
    };
    let outcome = ws.ask(&engine, &mut planner, "高铁凭证");
    assert_eq!(outcome.rounds.len(), 1);
    assert!(
        matches!(
            &planner.seen[2][0],
            Observation::Repeated { first_round: 1, .. }
        ),
        "{:?}",
        planner.seen[2]
    );
}

#[test]
fn the_turn_cap_ends_a_planner_that_never_finishes() {
    let (ws, engine) = workspace();
    let turns: Vec<Turn> = (0..100)
        .map(|_| {
            Box::new(|_: &PlannerContext<'_>, _: &[Observation]| {
                vec![search(&["这是一个完整的句子吗？"])]
            }) as _
        })
        .collect();
    let mut planner = Scripted {
        turns,
        seen: Vec::new(),
    };
    let outcome = ws.ask(&engine, &mut planner, "问题");
    assert_eq!(outcome.status, RunStatus::InsufficientEvidence);
    assert_eq!(outcome.reason, "turn_limit");
    assert_eq!(
        planner.seen.len() as u32,
        AgentRagOptions::default().max_planner_turns()
    );
    assert!(
        matches!(&planner.seen[1][0], Observation::Rejected { message } if message.contains("sentence"))
    );
}

#[test]
fn after_the_last_search_the_planner_answers_from_the_last_round() {
    let (ws, engine) = workspace();
    let mut s = ws.run_settings();
    s.options.max_search_rounds = 2;
    let mut planner = Scripted {
        turns: vec![
            Box::new(|_, _| vec![search(&["易报"])]),
            Box::new(|_, _| vec![search(&["开票期限"])]),
            // Answer-only turn: a further search is rejected…
            Box::new(|ctx, obs| {
                assert!(ctx.answer_only);
                let (id, _) = first_hit(obs).expect("hits of round 2");
                vec![
                    search(&["高铁"]),
                    PlannerAction::Answer {
                        text: "180天内开票。".into(),
                        citations: vec![ProposedCitation {
                            chunk_id: id,
                            quote: "乘车后180天内申请开具".into(),
                        }],
                    },
                ]
            }),
        ],
        seen: Vec::new(),
    };
    let outcome =
        ragtrail::run_agent(&engine, &mut planner, "开票期限", &s, &mut |_| {}).expect("run");
    assert_eq!(outcome.rounds.len(), 2);
    assert_eq!(outcome.status, RunStatus::Answered);
    let answer = outcome.answer.expect("answer");
    assert_eq!(answer.citations[0].title_path, "铁路客票规定 / 开票期限");
}

#[test]
fn forged_citations_and_quotes_are_refused_then_a_correct_answer_passes() {
    let (ws, engine) = workspace();
    let mut planner = Scripted {
        turns: vec![
            Box::new(|_, _| vec![search(&["高铁", "电子发票"])]),
            Box::new(|_, obs| {
                let (id, _) = first_hit(obs).expect("hits");
                vec![PlannerAction::Answer {
                    text: "forged".into(),
                    citations: vec![
                        ProposedCitation {
                            chunk_id: "c_0000000000000000".into(),
                            quote: "购票截图无效".into(),
                        },
                        ProposedCitation {
                            chunk_id: id,
                            quote: "购票截图有效".into(),
                        },
                    ],
                }]
            }),
            Box::new(|ctx, obs| {
                let refused = match &obs[0] {
                    Observation::CitationsRefused { refused } => refused.clone(),
                    other => panic!("expected a refusal, got {other:?}"),
                };
                assert_eq!(refused.len(), 2);
                assert!(refused[0].reason.contains("not returned"));
                assert!(refused[1].reason.contains("not in the cited chunk"));
                let id = match &ctx.rounds[0] {
                    Observation::Hits { hits, .. } => hits[0].chunk_id.clone(),
                    _ => unreachable!(),
                };
                vec![PlannerAction::Answer {
                    text: "截图无效。".into(),
                    citations: vec![ProposedCitation {
                        chunk_id: id,
                        quote: "购票截图无效".into(),
                    }],
                }]
            }),
        ],
        seen: Vec::new(),
    };
    let outcome = ws.ask(&engine, &mut planner, "高铁票截图能报销吗");
    assert_eq!(outcome.status, RunStatus::Answered);
    let trace = trace::read_trace(&outcome.trace.expect("trace").path).expect("read");
    let answers: Vec<bool> = trace
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a.grounded),
            _ => None,
        })
        .collect();
    assert_eq!(
        answers,
        vec![false, true],
        "the refused answer is in the trace too"
    );
}

#[test]
fn the_trace_verifies_matches_the_ledger_and_breaks_on_any_byte() {
    let (ws, engine) = workspace();
    let mut planner = OfflinePlanner::new();
    let outcome = ws.ask(&engine, &mut planner, "出差回来多久内要提交报销？");
    let finished = outcome.trace.expect("trace");
    let file = trace::read_trace(&finished.path).expect("read");
    let types: Vec<&str> = file.events().map(|e| e.body.type_name()).collect();
    assert_eq!(types.first(), Some(&"run_started"));
    assert_eq!(types.last(), Some(&"run_finished"));
    assert!(types.contains(&"search") && types.contains(&"llm_turn") && types.contains(&"answer"));
    let chain = trace::verify_chain(&file, None);
    assert!(chain.problem.is_none(), "{chain:?}");
    let name = finished
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_string();
    let ledger = trace::check_ledger(finished.path.parent().expect("dir"), &file, &name, None)
        .expect("ledger");
    assert_eq!(trace::assess(&chain, &ledger).exit_code(), 0, "{ledger:?}");
    // Every search hit was recorded with its content hash.
    for e in file.events() {
        if let EventBody::Search(s) = &e.body {
            for h in &s.hits {
                assert_eq!(
                    engine
                        .store()
                        .get(&h.hit.chunk_id)
                        .map(|c| c.content_hash.clone()),
                    Some(h.content_hash.clone())
                );
            }
        }
    }
    // Change one byte inside the second line: the chain breaks at that line.
    let bytes = std::fs::read(&finished.path).expect("bytes");
    let second = bytes.iter().position(|b| *b == b'\n').expect("newline") + 1;
    let snippet_at = second
        + bytes[second..]
            .windows(9)
            .position(|w| w == b"\"turn\":0,")
            .expect("turn field");
    let mut tampered = bytes.clone();
    tampered[snippet_at + 7] = b'7';
    std::fs::write(&finished.path, &tampered).expect("write");
    let file = trace::read_trace(&finished.path).expect("read tampered");
    let problem = trace::verify_chain(&file, None)
        .problem
        .expect("tampering detected");
    assert_eq!(problem.line, 2);
    // A trace cut mid-line reads up to the last whole line.
    std::fs::write(&finished.path, &bytes[..bytes.len() - 10]).expect("truncate");
    let file = trace::read_trace(&finished.path).expect("read torn");
    assert!(file.torn_tail.is_some());
    assert_eq!(file.lines.len(), types.len() - 1);
}

#[test]
fn evidence_keeps_only_citations_that_pass_the_answer_checks() {
    let (ws, engine) = workspace();
    let evidence = |forged_only: bool| -> Turn {
        Box::new(move |_, obs| {
            let (id, _) = first_hit(obs).expect("hits");
            let mut citations = vec![ProposedCitation {
                chunk_id: "c_0000000000000000".into(),
                quote: "购票截图无效".into(),
            }];
            if !forged_only {
                citations.push(ProposedCitation {
                    chunk_id: id,
                    quote: "购票截图无效".into(),
                });
            }
            vec![PlannerAction::Evidence {
                reason: "evidence: scripted".into(),
                citations,
            }]
        })
    };
    let mut planner = Scripted {
        turns: vec![
            Box::new(|_, _| vec![search(&["高铁", "电子发票"])]),
            evidence(false),
        ],
        seen: Vec::new(),
    };
    let outcome = ws.ask(&engine, &mut planner, "高铁票截图能报销吗");
    assert_eq!(outcome.status, RunStatus::Evidence);
    let given = outcome.answer.clone().expect("evidence passages");
    assert_eq!(given.citations.len(), 1, "the forged citation is dropped");
    assert_ne!(given.citations[0].chunk_id, "c_0000000000000000");
    assert!(given.text.contains("购票截图无效"), "{}", given.text);
    // The trace holds the passages as an answer event, the status telling them apart.
    let trace = trace::read_trace(&outcome.trace.expect("trace").path).expect("read");
    let cited: Vec<usize> = trace
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a.citations.len()),
            _ => None,
        })
        .collect();
    assert_eq!(cited, vec![1]);
    // Nothing but forged citations: nothing to show, the run gives up.
    let mut planner = Scripted {
        turns: vec![
            Box::new(|_, _| vec![search(&["高铁", "电子发票"])]),
            evidence(true),
        ],
        seen: Vec::new(),
    };
    let outcome = ws.ask(&engine, &mut planner, "高铁票截图能报销吗");
    assert_eq!(outcome.status, RunStatus::InsufficientEvidence);
    assert!(outcome.answer.is_none());
}

#[test]
fn a_give_up_before_any_search_is_overridden_by_the_loop_for_any_planner() {
    let (ws, engine) = workspace();
    let mut planner = Scripted {
        turns: vec![
            Box::new(|_, _| {
                vec![PlannerAction::GiveUp {
                    reason: "too many options".into(),
                }]
            }),
            Box::new(|_, _| {
                vec![PlannerAction::GiveUp {
                    reason: "no_relevant_hits: still nothing".into(),
                }]
            }),
        ],
        seen: Vec::new(),
    };
    let outcome = ws.ask(&engine, &mut planner, "高铁车费要什么电子发票？");
    // One search of the question's own words, then the second give-up is accepted.
    assert_eq!(outcome.rounds.len(), 1, "{:?}", outcome.rounds);
    let round = &outcome.rounds[0];
    assert!(
        round
            .reason
            .starts_with(ragtrail::internals::GAVE_UP_BEFORE_SEARCHING)
            && round.reason.contains("too many options"),
        "{}",
        round.reason
    );
    assert!(
        round.keywords.iter().any(|k| k.contains("发票")),
        "{:?}",
        round.keywords
    );
    assert!(
        round
            .hits
            .iter()
            .any(|h| h.title_path.contains("铁路客票规定")),
        "{:?}",
        round.hits
    );
    // The planner saw those hits on its second turn.
    assert!(
        matches!(&planner.seen[1][0], Observation::Hits { round: 1, .. }),
        "{:?}",
        planner.seen[1]
    );
    assert_eq!(outcome.status, RunStatus::InsufficientEvidence);
    let message = outcome.message.clone().unwrap_or_default();
    assert!(!message.contains("No search was run"), "{message}");
    assert!(!message.contains("未进行检索"), "{message}");
    assert!(message.contains("已尝试的词："), "{message}");
    // The trace says the loop overrode the planner, and with which reason.
    let file = trace::read_trace(&outcome.trace.as_ref().expect("trace").path).expect("read");
    let overrides: Vec<Option<String>> = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Search(s) => Some(s.overrode_give_up.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(overrides, [Some("too many options".to_string())]);
    let (integrity, _) = trace::check_integrity(&outcome.trace.as_ref().expect("trace").path, None)
        .expect("integrity");
    assert_eq!(
        integrity.verdict,
        trace::Verdict::Clean,
        "{:?}",
        integrity.problems
    );
    drop(file);
}

#[test]
fn a_give_up_without_anything_to_search_is_accepted() {
    let (ws, engine) = workspace();
    let mut planner = Scripted {
        turns: vec![Box::new(|_, _| {
            vec![PlannerAction::GiveUp {
                reason: "nothing to search".into(),
            }]
        })],
        seen: Vec::new(),
    };
    // Punctuation only: no word of the question is worth a search.
    let outcome = ws.ask(&engine, &mut planner, "？？？");
    assert!(outcome.rounds.is_empty());
    assert_eq!(outcome.status, RunStatus::InsufficientEvidence);
    assert_eq!(planner.seen.len(), 1);
}
