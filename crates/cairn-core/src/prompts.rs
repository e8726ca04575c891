//! User prompts: what was asked, per session (redacted, capped like memories). Its SQL is
//! `crate::store::prompts`.

/// A prompt to record.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NewPrompt {
    pub content: String,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::store::Store;

    #[test]
    fn prompts_are_redacted_deduplicated_and_listed() {
        let mut s = Store::open_in_memory().unwrap();
        let new = NewPrompt {
            content: "fix login <private>hunter2</private>".into(),
            project: Some("App".into()),
            ..Default::default()
        };
        let a = s.add_prompt(&new).unwrap();
        let b = s.add_prompt(&new).unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(a.content, "fix login [REDACTED]");
        assert_eq!(a.session_id, "manual-save-app");
        assert_eq!(s.recent_prompts(Some("app"), 10).unwrap().len(), 1);
        s.delete_prompt(a.id).unwrap();
        assert_eq!(s.get_prompt(a.id).unwrap_err().code, ErrorCode::PromptNotFound);
        assert_eq!(s.add_prompt(&NewPrompt::default()).unwrap_err().code, ErrorCode::EmptyField);
    }
}
