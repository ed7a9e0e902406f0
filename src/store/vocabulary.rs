//! The domain's closed vocabularies as SQLite values. Each word is stored as its `as_str` text,
//! so the columns keep the text earlier builds wrote; a stored word outside the vocabulary reads
//! back as a conversion error carrying the [`UnknownWord`] (vocabulary and word), never as a
//! silent default.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::domain::{
    EscalationTrigger, OutcomeKind, ParkReason, ReactionKind, RetryTrigger, RunStatus, UnknownWord,
};

/// `ToSql` and `FromSql` for vocabulary enums, through their one `as_str` and `FromStr`.
macro_rules! sql_vocabulary {
    ($($name:ty),+ $(,)?) => {
        $(
            impl ToSql for $name {
                fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                    Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.as_str().as_bytes())))
                }
            }

            impl FromSql for $name {
                fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                    value
                        .as_str()?
                        .parse::<$name>()
                        .map_err(FromSqlError::other)
                }
            }
        )+
    };
}

sql_vocabulary!(
    RetryTrigger,
    RunStatus,
    ParkReason,
    OutcomeKind,
    ReactionKind,
    EscalationTrigger,
);

/// The [`UnknownWord`] behind a failed read of a vocabulary column, if that is why it failed.
pub fn unknown_word(e: &rusqlite::Error) -> Option<&UnknownWord> {
    match e {
        rusqlite::Error::FromSqlConversionFailure(_, _, source) => source.downcast_ref(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    fn conn() -> Connection {
        Connection::open_in_memory().expect("in-memory database")
    }

    #[test]
    fn every_word_round_trips_as_its_text() {
        let c = conn();
        for s in RunStatus::ALL {
            let text: rusqlite::Result<String> = c.query_row("SELECT ?1", [s], |r| r.get(0));
            assert_eq!(text.as_deref(), Ok(s.as_str()));
            let back: rusqlite::Result<RunStatus> =
                c.query_row("SELECT ?1", [s.as_str()], |r| r.get(0));
            assert_eq!(back, Ok(*s));
        }
        for t in RetryTrigger::ALL {
            let back: rusqlite::Result<RetryTrigger> = c.query_row("SELECT ?1", [t], |r| r.get(0));
            assert_eq!(back, Ok(*t));
        }
        for p in ParkReason::ALL {
            let back: rusqlite::Result<ParkReason> = c.query_row("SELECT ?1", [p], |r| r.get(0));
            assert_eq!(back, Ok(*p));
        }
        for k in OutcomeKind::ALL {
            let back: rusqlite::Result<OutcomeKind> = c.query_row("SELECT ?1", [k], |r| r.get(0));
            assert_eq!(back, Ok(*k));
        }
    }

    #[test]
    fn an_unknown_stored_word_is_a_typed_error_naming_it() {
        let c = conn();
        let e = c
            .query_row("SELECT 'paused'", [], |r| r.get::<_, RunStatus>(0))
            .err();
        let word = e.as_ref().and_then(unknown_word);
        assert_eq!(
            word,
            Some(&UnknownWord {
                vocabulary: "RunStatus",
                word: "paused".into()
            })
        );
        assert!(e.is_some_and(|e| e.to_string().contains("\"paused\"")));
        // A number where a word belongs is a type error, not an unknown word.
        let e = c
            .query_row("SELECT 7", [], |r| r.get::<_, ParkReason>(0))
            .err();
        assert!(matches!(
            e,
            Some(
                rusqlite::Error::InvalidColumnType(..)
                    | rusqlite::Error::FromSqlConversionFailure(..)
            )
        ));
        assert_eq!(e.as_ref().and_then(unknown_word), None);
    }
}
